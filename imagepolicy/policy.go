// Package imagepolicy decides, from a registry's answer, which image
// reference an application's repository should name next. It is pure: the
// tags and digests come from registryclient, the files are written by
// imagewrite, and the decision in between (newest semver in a range, newest
// by a sortable capture, the digest a moving tag points at now) is here,
// where it is tested without a registry or a repository.
//
// A decision never moves backwards: a current tag newer than anything the
// registry lists, or a tag that vanished, is reported and left alone.
package imagepolicy

import (
	"cmp"
	"errors"
	"fmt"
	"math/big"
	"regexp"
	"slices"
	"strings"

	"github.com/Masterminds/semver/v3"

	"github.com/flotilla-gitops/flotilla/application"
)

// Kind is how a policy chooses.
type Kind string

// The kinds of policy.
const (
	Semver  Kind = "semver"
	Pattern Kind = "pattern"
	Digest  Kind = "digest"
)

// Policy is a compiled application.ImagePolicy.
type Policy struct {
	Kind Kind
	// Image is the repository, as the policy spells it.
	Image string
	// Range is set for Semver.
	Range *semver.Constraints
	// Pattern and its capture index are set for Pattern; Numerical says
	// the capture compares as a number.
	Pattern   *regexp.Regexp
	Capture   int
	Numerical bool
	// Tag is the moving tag of a Digest policy.
	Tag string
	// Filter, when set, keeps only the tags it matches.
	Filter *regexp.Regexp
}

// Compile turns a validated policy into a Policy.
func Compile(p application.ImagePolicy) (*Policy, error) {
	out := &Policy{Image: p.Image}
	var err error
	if p.TagFilter != "" {
		if out.Filter, err = regexp.Compile(p.TagFilter); err != nil {
			return nil, fmt.Errorf("image %s: tagFilter: %w", p.Image, err)
		}
	}
	switch {
	case p.Semver != "":
		out.Kind = Semver
		if out.Range, err = semver.NewConstraint(p.Semver); err != nil {
			return nil, fmt.Errorf("image %s: semver: %w", p.Image, err)
		}
	case p.Pattern != "":
		out.Kind = Pattern
		// A pattern must match the whole tag: a partial match would let
		// "1-build-9-debug" pass for "build-(\d+)".
		if out.Pattern, err = regexp.Compile(`^(?:` + p.Pattern + `)$`); err != nil {
			return nil, fmt.Errorf("image %s: pattern: %w", p.Image, err)
		}
		out.Capture = captureIndex(out.Pattern, p.Capture)
		if out.Capture < 0 {
			return nil, fmt.Errorf("image %s: capture: the pattern has no group %q", p.Image, p.Capture)
		}
		out.Numerical = p.Order != application.OrderAlphabetical
	case p.Digest != "":
		out.Kind = Digest
		out.Tag = p.Digest
	default:
		return nil, fmt.Errorf("image %s: no semver, pattern or digest", p.Image)
	}
	return out, nil
}

// captureIndex is the submatch a pattern sorts by: the named group, else
// one named "ts", else the first group, else the whole match (0).
func captureIndex(re *regexp.Regexp, name string) int {
	if name != "" {
		return re.SubexpIndex(name)
	}
	if i := re.SubexpIndex("ts"); i >= 0 {
		return i
	}
	// Group 1 is the (?:…) wrapper's content only if the user wrote a
	// group; the wrapper is non-capturing.
	if re.NumSubexp() > 0 {
		return 1
	}
	return 0
}

// Outcome says what a decision found.
type Outcome string

// The outcomes. Only Update leads to a commit.
const (
	// Update: a newer reference than the current one is chosen.
	Update Outcome = "update"
	// Current: the current reference is already the chosen one.
	Current Outcome = "current"
	// Backwards: the newest candidate is older than the current tag;
	// nothing is written.
	Backwards Outcome = "backwards"
	// Vanished: the current tag (or a digest policy's moving tag) is no
	// longer in the registry and nothing newer is; nothing is written.
	Vanished Outcome = "vanished"
	// NoCandidate: no tag satisfies the policy.
	NoCandidate Outcome = "no-candidate"
)

// Decision is the result for one image.
type Decision struct {
	Outcome Outcome
	// Tag is the chosen tag (for Update and Current), and for a Digest
	// policy the moving tag.
	Tag string
	// Digest is set for Digest policies: the digest the tag points at.
	Digest string
	// Newest is the newest candidate the registry listed ("" for none),
	// or for a Digest policy the digest the tag points at now: what a
	// status shows beside the current value.
	Newest string
	// Reason explains a non-Update outcome to a person.
	Reason string
}

// ErrNoTag is returned when a tag policy is asked about a current value
// that is not a tag (a digest-only reference).
var ErrNoTag = errors.New("current reference has no tag")

// Candidates returns the tags the policy accepts, newest first.
func (p *Policy) Candidates(tags []string) []string {
	type cand struct {
		tag string
		ver *semver.Version
		key string
		num *big.Int
	}
	var cs []cand
	for _, t := range tags {
		if p.Filter != nil && !p.Filter.MatchString(t) {
			continue
		}
		switch p.Kind {
		case Semver:
			v, err := semver.NewVersion(t)
			if err != nil || !p.Range.Check(v) {
				continue
			}
			cs = append(cs, cand{tag: t, ver: v})
		case Pattern:
			m := p.Pattern.FindStringSubmatch(t)
			if m == nil {
				continue
			}
			c := cand{tag: t, key: m[p.Capture]}
			if p.Numerical {
				n, ok := new(big.Int).SetString(c.key, 10)
				if !ok {
					continue // not sortable as asked: left out, not guessed
				}
				c.num = n
			}
			cs = append(cs, c)
		}
	}
	slices.SortFunc(cs, func(a, b cand) int {
		var r int
		switch {
		case a.ver != nil:
			r = b.ver.Compare(a.ver)
		case a.num != nil:
			r = b.num.Cmp(a.num)
		default:
			r = strings.Compare(b.key, a.key)
		}
		// Equal versions spelled differently (v1.2.0, 1.2.0) and equal
		// captures: the tag's own order decides, so the choice is stable.
		return cmp.Or(r, strings.Compare(b.tag, a.tag))
	})
	out := make([]string, len(cs))
	for i, c := range cs {
		out[i] = c.tag
	}
	return out
}

// Compare orders two tags by the policy's key, ignoring its range and
// filter, so that a current tag outside the range (2.0.0 under "<2") still
// counts as newer than every candidate: negative when a is older. ok is
// false when either tag has no key (it does not parse, or does not match
// the pattern), and then the two are not comparable.
func (p *Policy) Compare(a, b string) (r int, ok bool) {
	switch p.Kind {
	case Semver:
		va, errA := semver.NewVersion(a)
		vb, errB := semver.NewVersion(b)
		if errA != nil || errB != nil {
			return 0, false
		}
		return va.Compare(vb), true
	case Pattern:
		ma, mb := p.Pattern.FindStringSubmatch(a), p.Pattern.FindStringSubmatch(b)
		if ma == nil || mb == nil {
			return 0, false
		}
		ka, kb := ma[p.Capture], mb[p.Capture]
		if !p.Numerical {
			return strings.Compare(ka, kb), true
		}
		na, okA := new(big.Int).SetString(ka, 10)
		nb, okB := new(big.Int).SetString(kb, 10)
		if !okA || !okB {
			return 0, false
		}
		return na.Cmp(nb), true
	}
	return 0, false
}

// ChooseTag decides a Semver or Pattern policy: current is the tag the
// repository names now ("" when it names none), tags what the registry
// lists.
func (p *Policy) ChooseTag(current string, tags []string) Decision {
	cands := p.Candidates(tags)
	listed := slices.Contains(tags, current)
	if len(cands) == 0 {
		if current != "" && !listed {
			return Decision{Outcome: Vanished, Tag: current, Reason: fmt.Sprintf("tag %s is no longer in the registry and no tag fits the policy", current)}
		}
		return Decision{Outcome: NoCandidate, Tag: current, Reason: "no tag in the registry fits the policy"}
	}
	newest := cands[0]
	if newest == current {
		return Decision{Outcome: Current, Tag: current, Newest: newest}
	}
	r, comparable := p.Compare(newest, current)
	switch {
	case comparable && r < 0 && !listed:
		return Decision{Outcome: Vanished, Tag: current, Newest: newest, Reason: fmt.Sprintf("tag %s is no longer in the registry; the newest that fits, %s, is older: not followed", current, newest)}
	case comparable && r < 0:
		return Decision{Outcome: Backwards, Tag: current, Newest: newest, Reason: fmt.Sprintf("the newest tag that fits, %s, is older than %s: not followed", newest, current)}
	case comparable && r == 0:
		// Same version spelled differently: keep what git has.
		return Decision{Outcome: Current, Tag: current, Newest: newest}
	}
	// Newer, or the current tag is outside the policy (a first adoption
	// from "latest" or from a tag the range no longer admits).
	return Decision{Outcome: Update, Tag: newest, Newest: newest}
}

// ChooseDigest decides a Digest policy: current is the digest the
// repository pins now ("" for none), resolved the digest the moving tag
// points at ("" when the registry does not have the tag).
func (p *Policy) ChooseDigest(current, resolved string) Decision {
	switch {
	case resolved == "":
		return Decision{Outcome: Vanished, Tag: p.Tag, Digest: current, Reason: fmt.Sprintf("tag %s is not in the registry: the pinned digest is kept", p.Tag)}
	case resolved == current:
		return Decision{Outcome: Current, Tag: p.Tag, Digest: current, Newest: resolved}
	}
	return Decision{Outcome: Update, Tag: p.Tag, Digest: resolved, Newest: resolved}
}
