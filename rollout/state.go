package rollout

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/flotilla-gitops/flotilla/labels"
)

// Colour name suffixes: the stable colour keeps the declared name.
const (
	CanarySuffix  = "-canary"
	PreviewSuffix = "-preview"
)

// ColourName is the unscoped name of the extra colour of service: the
// canary beside it, or the blue/green preview. Predictable, so that an
// operator, the router config and the sweep all find it without a record.
func ColourName(service string, s Strategy) string {
	if s == BlueGreen {
		return service + PreviewSuffix
	}
	return service + CanarySuffix
}

// Phase is where a rollout stands.
type Phase string

// The phases. The zero Phase means no rollout is recorded.
const (
	// Progressing is a canary on one of its steps.
	Progressing Phase = "Progressing"
	// Previewing is a blue/green preview running with no traffic.
	Previewing Phase = "Previewing"
	// Switched is blue/green with all traffic on the new colour and the
	// old one kept for the rollback window.
	Switched Phase = "Switched"
	// Promoting is the stable service being updated to the new spec; the
	// weights stay where they were until it is ready.
	Promoting Phase = "Promoting"
	// Completed is a finished rollout: the stable service runs the new
	// spec with all traffic and the extra colour is scaled to zero.
	Completed Phase = "Completed"
	// Aborted is a rollout stopped by an analysis or an operator: all
	// traffic on stable, the extra colour at zero. It stays so until a new
	// revision, a promote or a retry.
	Aborted Phase = "Aborted"
	// Superseded is a rollout a new revision replaced while its colour
	// still had traffic: all traffic back on stable, and the colour keeps
	// the replaced revision's tasks until ScaleDownAt, so that a router
	// still sending it requests until its next poll finds them. The new
	// revision starts from its first step after that.
	Superseded Phase = "Superseded"
)

// active reports whether p moves traffic by itself as time passes.
func (p Phase) active() bool {
	return p == Progressing || p == Previewing || p == Switched || p == Promoting
}

// Result is an analysis verdict's outcome.
type Result string

// The results. The zero Result is no verdict.
const (
	Pass Result = "Pass"
	Fail Result = "Fail"
	// Inconclusive is an interval that proves nothing either way, such as
	// one with fewer requests than minRequests.
	Inconclusive Result = "Inconclusive"
)

// State is what a rollout has done so far. It is recorded as labels of
// the extra colour's service (Labels, StateFromLabels), so the swarm is
// the record.
type State struct {
	// Revision identifies the desired spec this rollout brings in; the
	// caller chooses it (an opaque digest, say) and Decide only compares it.
	Revision string
	Phase    Phase
	// Step is the canary step the rollout is on (0 for blue/green).
	Step int
	// Weight is the share of traffic, in percent, the extra colour has now.
	Weight int
	// StepStarted is when the current step's traffic began to flow; zero
	// while its colour is still getting ready, when Weight is still the
	// previous step's.
	StepStarted time.Time
	// Paused is set by an operator: weights stay as they are.
	Paused bool
	// Failures counts consecutive failing verdicts.
	Failures int
	// Verdict is the last verdict counted in this step, and AnalysedAt
	// the end of the interval it measured; a verdict is counted once.
	Verdict    Result
	AnalysedAt time.Time
	// Reason says why the rollout was aborted; Metric and Values name the
	// evidence when an analysis aborted it.
	Reason string
	Metric string
	Values string
	// ScaleDownAt, on a completed or aborted rollout, is when the extra
	// colour may stop: until then it keeps its tasks while the router lets
	// go of them (Spec.ScaleDownDelay).
	ScaleDownAt time.Time
}

// LabelPrefix starts every label State writes.
const LabelPrefix = labels.RolloutPrefix

// The label keys, below LabelPrefix.
const (
	labelRevision    = "revision"
	labelPhase       = "phase"
	labelStep        = "step"
	labelWeight      = "weight"
	labelStepStarted = "step-started"
	labelPaused      = "paused"
	labelFailures    = "failures"
	labelVerdict     = "verdict"
	labelAnalysedAt  = "analysed-at"
	labelReason      = "abort-reason"
	labelMetric      = "abort-metric"
	labelValues      = "abort-values"
	labelScaleDownAt = "scale-down-at"
)

// maxLabelValue bounds a recorded string: labels are kept on every
// service read, and a reason is a sentence, not a log.
const maxLabelValue = 1024

// Labels is the state as service labels. Every key is present, an empty
// value for what is unset, so writing them over the old ones leaves no
// stale key behind.
func (s State) Labels() map[string]string {
	l := map[string]string{
		labelRevision:    s.Revision,
		labelPhase:       string(s.Phase),
		labelStep:        strconv.Itoa(s.Step),
		labelWeight:      strconv.Itoa(s.Weight),
		labelStepStarted: formatTime(s.StepStarted),
		labelPaused:      strconv.FormatBool(s.Paused),
		labelFailures:    strconv.Itoa(s.Failures),
		labelVerdict:     string(s.Verdict),
		labelAnalysedAt:  formatTime(s.AnalysedAt),
		labelReason:      clip(s.Reason),
		labelMetric:      clip(s.Metric),
		labelValues:      clip(s.Values),
		labelScaleDownAt: formatTime(s.ScaleDownAt),
	}
	out := make(map[string]string, len(l))
	for k, v := range l {
		out[LabelPrefix+k] = v
	}
	return out
}

func formatTime(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format(time.RFC3339Nano)
}

func clip(s string) string {
	if len(s) <= maxLabelValue {
		return s
	}
	cut := maxLabelValue
	for cut > 0 && !isRuneStart(s[cut]) {
		cut--
	}
	return s[:cut]
}

func isRuneStart(b byte) bool { return b&0xC0 != 0x80 }

// errLabels is wrapped by every refusal of recorded labels.
var errLabels = errors.New("rollout labels")

// StateFromLabels reads a state back from a service's labels; labels
// outside LabelPrefix are ignored, and none at all is the zero State (no
// rollout). A key it does not know or a value it cannot read is an error:
// a record that cannot be trusted is not guessed at.
func StateFromLabels(labels map[string]string) (State, error) {
	var s State
	var err error
	bad := func(k, v, why string) error {
		return fmt.Errorf("%w: %s%s=%q: %s", errLabels, LabelPrefix, k, clip(v), why)
	}
	for _, full := range slices.Sorted(maps.Keys(labels)) {
		k, ok := strings.CutPrefix(full, LabelPrefix)
		if !ok {
			continue
		}
		v := labels[full]
		if len(v) > maxLabelValue {
			return State{}, bad(k, v, "too long")
		}
		switch k {
		case labelRevision:
			s.Revision = v
		case labelPhase:
			switch p := Phase(v); p {
			case "", Progressing, Previewing, Switched, Promoting, Completed, Aborted, Superseded:
				s.Phase = p
			default:
				return State{}, bad(k, v, "unknown phase")
			}
		case labelStep, labelWeight, labelFailures:
			n := 0
			if v != "" {
				if n, err = strconv.Atoi(v); err != nil {
					return State{}, bad(k, v, "not a whole number")
				}
			}
			switch k {
			case labelStep:
				s.Step = n
			case labelWeight:
				s.Weight = n
			default:
				s.Failures = n
			}
		case labelStepStarted, labelAnalysedAt, labelScaleDownAt:
			var t time.Time
			if v != "" {
				if t, err = time.Parse(time.RFC3339Nano, v); err != nil {
					return State{}, bad(k, v, "not an RFC 3339 time")
				}
				t = t.UTC()
			}
			switch k {
			case labelStepStarted:
				s.StepStarted = t
			case labelAnalysedAt:
				s.AnalysedAt = t
			default:
				s.ScaleDownAt = t
			}
		case labelPaused:
			switch v {
			case "", "false":
			case "true":
				s.Paused = true
			default:
				return State{}, bad(k, v, "want true or false")
			}
		case labelVerdict:
			switch r := Result(v); r {
			case "", Pass, Fail, Inconclusive:
				s.Verdict = r
			default:
				return State{}, bad(k, v, "unknown verdict")
			}
		case labelReason:
			s.Reason = v
		case labelMetric:
			s.Metric = v
		case labelValues:
			s.Values = v
		default:
			return State{}, bad(k, v, "unknown key")
		}
	}
	if err := s.check(); err != nil {
		return State{}, fmt.Errorf("%w: %w", errLabels, err)
	}
	return s, nil
}

// check refuses a state no Decide could have produced, whatever the spec.
func (s State) check() error {
	switch {
	case s.Phase == "" && s != (State{}):
		return errors.New("a state without a phase records nothing else")
	case s.Phase != "" && s.Revision == "":
		return fmt.Errorf("phase %s without a revision", s.Phase)
	case s.Step < 0 || s.Step >= maxSteps:
		return fmt.Errorf("step %d out of range 0..%d", s.Step, maxSteps-1)
	case s.Weight < 0 || s.Weight > 100:
		return fmt.Errorf("weight %d out of range 0..100", s.Weight)
	case s.Failures < 0 || s.Failures > maxFailureLimit:
		return fmt.Errorf("failures %d out of range 0..%d", s.Failures, maxFailureLimit)
	case !s.ScaleDownAt.IsZero() && s.Phase != Aborted && s.Phase != Completed && s.Phase != Superseded:
		return fmt.Errorf("phase %s with a scale-down time", s.Phase)
	case (s.Phase == Aborted || s.Phase == Completed || s.Phase == Superseded) && s.Weight != 0:
		return fmt.Errorf("phase %s with weight %d", s.Phase, s.Weight)
	case len(s.Revision) > maxLabelValue:
		return errors.New("revision too long")
	}
	return nil
}
