package application

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

func TestWorst(t *testing.T) {
	// Best to worst; Worst of any pair must be the later one.
	order := []Health{Healthy, Suspended, Progressing, Missing, Degraded, HealthUnknown}
	for i, a := range order {
		for j, b := range order {
			want := order[max(i, j)]
			if got := Worst(a, b); got != want {
				t.Errorf("Worst(%s, %s) = %s, want %s", a, b, got, want)
			}
		}
	}
	if got := Worst(Healthy, Health("Sideways")); got != HealthUnknown {
		t.Errorf("a value outside the vocabulary gave %s, want Unknown", got)
	}
	if got := Worst(Health(""), Healthy); got != HealthUnknown {
		t.Errorf("empty health gave %s, want Unknown", got)
	}
}

func TestVocabulary_Valid(t *testing.T) {
	for _, s := range []Sync{Synced, OutOfSync, SyncUnknown} {
		if !s.Valid() {
			t.Errorf("%q not valid", s)
		}
	}
	for _, r := range []Reason{ReasonNone, ReasonGit, ReasonDrift} {
		if !r.Valid() {
			t.Errorf("%q not valid", r)
		}
	}
	for _, h := range []Health{Healthy, Suspended, Progressing, Missing, Degraded, HealthUnknown} {
		if !h.Valid() {
			t.Errorf("%q not valid", h)
		}
	}
	if Sync("synced").Valid() || Reason("Git").Valid() || Health("").Valid() {
		t.Error("an undeclared value counted as valid")
	}
}

func TestStatus_json(t *testing.T) {
	out, err := json.Marshal(Status{Name: "shop", Stack: "shop", Sync: OutOfSync, SyncReason: ReasonDrift, Health: Healthy})
	if err != nil {
		t.Fatal(err)
	}
	want := `{"name":"shop","stack":"shop","sync":"OutOfSync","syncReason":"drift","health":"Healthy"}`
	if string(out) != want {
		t.Errorf("got  %s\nwant %s", out, want)
	}
	out, _ = json.Marshal(Status{LastSyncTime: time.Unix(0, 0).UTC(), Services: []ServiceStatus{{Name: "web", Health: Degraded, Running: 1, Desired: 3}}})
	for _, key := range []string{`"lastSyncTime":"1970-01-01T00:00:00Z"`, `"services":[{"name":"web","health":"Degraded","running":1,"desired":3}]`} {
		if !strings.Contains(string(out), key) {
			t.Errorf("%s lacks %s", out, key)
		}
	}
}
