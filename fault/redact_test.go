package fault

import (
	"errors"
	"io/fs"
	"strings"
	"testing"

	"github.com/flotilla-gitops/flotilla/redact"
)

func TestRedact_blanksEveryValueLongestFirstAndKeepsWhereTheProblemIs(t *testing.T) {
	cause := errors.Join(fs.ErrInvalid, errors.New(`value "hunter2-long" is not "hunter2"`))
	err := Redact(&Error{App: "shop", File: "values.yaml", Line: 3, Field: "db.hunter2", Err: cause}, []string{"hunter2", "hunter2-long"})
	msg := err.Error()
	if strings.Contains(msg, "hunter2") || strings.Count(msg, redact.Mark) != 3 {
		t.Fatalf("message %q still holds a value, or was not blanked once per value", msg)
	}
	var fe *Error
	if !errors.As(err, &fe) || fe.File != "values.yaml" || fe.Line != 3 || fe.App != "shop" {
		t.Fatalf("redacted error lost its place: %#v", err)
	}
	if !errors.Is(err, fs.ErrInvalid) {
		t.Fatal("redacted error no longer unwraps to its cause")
	}
	if Redact(nil, []string{"x"}) != nil || Redact(cause, nil) != cause {
		t.Fatal("nothing to redact must give the error back as it is")
	}
}
