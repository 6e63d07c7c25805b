package application

import (
	"strings"
	"testing"
	"time"
)

const rollbackFile = `apiVersion: flotilla/v1
applications:
  - name: shop
    source: {repoURL: "https://h/x.git"}
    syncPolicy:
      automated: {}
      rollback: {onDegraded: ONDEGRADED}
`

func TestParse_rollbackOnDegradedIsReadAndChecked(t *testing.T) {
	f, err := Parse("apps.yaml", []byte(replaceOnce(rollbackFile, "ONDEGRADED", "2m")))
	if err != nil {
		t.Fatal(err)
	}
	Defaults(f)
	if err := Validate(f); err != nil {
		t.Fatal(err)
	}
	if rb := f.Applications[0].SyncPolicy.Rollback; rb == nil || rb.OnDegraded.Duration != 2*time.Minute {
		t.Fatalf("rollback = %+v, want onDegraded 2m", rb)
	}

	for _, tc := range []struct{ value string }{{"0s"}, {"-1m"}} {
		_, err := Parse("apps.yaml", []byte(replaceOnce(rollbackFile, "ONDEGRADED", tc.value)))
		checkProblems(t, err, []want{{app: "shop", line: 7, field: "applications[0].syncPolicy.rollback.onDegraded"}})
	}

	_, err = Parse("apps.yaml", []byte(replaceOnce(rollbackFile, "onDegraded: ONDEGRADED", "afterDegraded: 2m")))
	if err == nil {
		t.Error("an unknown key under rollback was accepted")
	}
}

func replaceOnce(s, old, new string) string { return strings.Replace(s, old, new, 1) }
