package renderbox

import (
	"encoding/gob"
	"errors"
	"time"

	"github.com/flotilla-gitops/flotilla/chartengine"
	"github.com/flotilla-gitops/flotilla/chartrepo"
	"github.com/flotilla-gitops/flotilla/compose"
	"github.com/flotilla-gitops/flotilla/fault"
	"github.com/flotilla-gitops/flotilla/secretstore"
)

// The parent and the child speak gob over the child's stdin and stdout:
// the parent sends one request; the child answers with calls (decrypt a
// file, resolve a dependency) the parent replies to on stdin, then one
// final message carrying the result. Decryption keys and chart
// repository credentials so stay in the parent.

// request is one render job as the child receives it: chartengine.Dir
// without its functions, which become calls back to the parent.
type request struct {
	Root, Path      string
	ValueFiles      []string
	ExtraValueFiles []chartengine.ValueFile
	Values, Set     map[string]any
	SealKey         []byte
	Limits          compose.Limits
	APIVersion      string
	HasDecrypt      bool
	HasResolve      bool
	HasSecretRef    bool
	Release         chartengine.Release
	// Recorded, when HasRecorded, is the newest release's manifest: a
	// render that differs from it is done again as the next revision, in
	// the same child, as reconcile does in process.
	Recorded    string
	HasRecorded bool
	// Memory is the child's address-space limit in bytes; CPU its CPU
	// time limit.
	Memory int64
	CPU    time.Duration
}

// up is a message from the child.
type up struct {
	Call string // "decrypt", "resolve", "secretRef", or "" for the result

	File string // decrypt
	Data []byte

	Repo, Name, Constraint string // resolve

	Use string            // secretRef
	Ref compose.SecretRef // secretRef

	Result *result
}

// down is the parent's reply to a call.
type down struct {
	Data              []byte // decrypt; secretRef: the value
	Tag               string // secretRef
	Root, Dir, Origin string // resolve: where the fetched chart lies
	Err               *wireError
}

// result is the render's outcome.
type result struct {
	Manifest     string
	Secrets      map[string][]byte
	Sealed       map[string]string
	Refs         []compose.ResolvedRef
	Warnings     []string
	Chart        chartengine.Metadata
	ValuesDigest string
	Err          *wireError
}

// wireError carries an error across: its text, the *fault.Error inside
// it (file, line, field), and which of the sentinels callers test for it
// wraps, so errors.Is and errors.As answer as they would in process.
type wireError struct {
	Msg      string
	HasFault bool
	File     string
	Line     int
	Field    string
	FaultMsg string
	Is       []int
}

// sentinels are the errors callers classify a render by.
var sentinels = []error{
	chartrepo.ErrUnreachable,
	chartengine.ErrBudget,
	chartengine.ErrInvalidChart,
	chartengine.ErrTemplate,
	chartengine.ErrValues,
	chartengine.ErrOutput,
	chartengine.ErrUnsupported,
	chartengine.ErrPlaintextSecret,
	compose.ErrTooLarge,
	compose.ErrUnsupported,
	compose.ErrSealedMissing,
	compose.ErrEncryptedOutsideEnvironment,
	compose.ErrNoSecretStore,
	secretstore.ErrUnavailable,
	secretstore.ErrNoValue,
	secretstore.ErrNotGranted,
}

func init() {
	// Values are YAML decoded into any.
	gob.Register(map[string]any{})
	gob.Register([]any{})
	gob.Register(map[any]any{})
	gob.Register([]string{})
	gob.Register([]map[string]any{})
	gob.Register(time.Time{})
}

func toWire(err error) *wireError {
	if err == nil {
		return nil
	}
	w := &wireError{Msg: err.Error()}
	var fe *fault.Error
	if errors.As(err, &fe) {
		w.HasFault, w.File, w.Line, w.Field = true, fe.File, fe.Line, fe.Field
		if fe.Err != nil {
			w.FaultMsg = fe.Err.Error()
		}
	}
	for i, s := range sentinels {
		if errors.Is(err, s) {
			w.Is = append(w.Is, i)
		}
	}
	return w
}

func (w *wireError) err() error {
	if w == nil {
		return nil
	}
	e := &remoteError{msg: w.Msg}
	if w.HasFault {
		e.wraps = append(e.wraps, &fault.Error{File: w.File, Line: w.Line, Field: w.Field, Err: errors.New(w.FaultMsg)})
	}
	for _, i := range w.Is {
		if i >= 0 && i < len(sentinels) {
			e.wraps = append(e.wraps, sentinels[i])
		}
	}
	return e
}

// remoteError is an error made on the other side of the pipe: the same
// text, and the fault and sentinels it wrapped there.
type remoteError struct {
	msg   string
	wraps []error
}

func (e *remoteError) Error() string   { return e.msg }
func (e *remoteError) Unwrap() []error { return e.wraps }
