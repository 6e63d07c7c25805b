package sweep

import (
	"errors"
	"slices"
	"testing"
)

// fakeNoStamps has every capability a sweep uses but OwnerStamps.
type fakeNoStamps struct {
	core
	drift
	declarer
	lister
	remover
}

func stamped(l Live, owners map[string]string) Live {
	l.Owners = owners
	return l
}

func TestDecide_whatOnlyThisApplicationsOwnerStampProvesIsDeleted(t *testing.T) {
	// Revision 1 was recorded after a deploy that crashed part-way had
	// created s_gone, s_back and s_gone-conf: no record declares them.
	p := Decide(Input{
		Stack:   "s",
		Owner:   owner,
		Current: decl("service/s_web"),
		History: []Claim{{Revision: 1, Owner: owner, Declared: decl("service/s_web")}},
		Live: stamped(liveOf("service/s_web", "service/s_gone", "service/s_hand", "service/s_theirs", "network/s_back", "config/s_gone-conf", "secret/s_key"),
			map[string]string{
				"service/s_web": owner, "service/s_gone": owner, "service/s_theirs": foreign,
				"network/s_back": owner, "config/s_gone-conf": owner, "secret/s_key": owner,
			}),
	})
	if got, want := keys(p.Delete), []string{"service/s_gone", "network/s_back", "config/s_gone-conf", "secret/s_key"}; !slices.Equal(got, want) {
		t.Fatalf("Delete = %v, want %v", got, want)
	}
	if got, want := keys(p.Unmanaged), []string{"service/s_hand", "service/s_theirs"}; !slices.Equal(got, want) {
		t.Fatalf("Unmanaged = %v, want the unstamped and the foreign-stamped service", got)
	}
}

func TestDecide_aStampNeverOverridesAnotherOwnersRecord(t *testing.T) {
	p := Decide(Input{
		Stack:   "s",
		Owner:   owner,
		Current: decl(),
		History: []Claim{{Revision: 2, Owner: foreign, Declared: decl("service/s_shared")}},
		Live:    stamped(liveOf("service/s_shared"), map[string]string{"service/s_shared": owner}),
	})
	if len(p.Delete) != 0 || !slices.Equal(keys(p.Unmanaged), []string{"service/s_shared"}) {
		t.Fatalf("Delete %v, Unmanaged %v: a foreign record's claim must win over a stamp", keys(p.Delete), keys(p.Unmanaged))
	}
}

func TestDecide_aStampProvesNothingWhileTheCurrentRevisionOrANewerForeignOneIsUnknown(t *testing.T) {
	live := stamped(liveOf("service/s_gone"), map[string]string{"service/s_gone": owner})
	for name, in := range map[string]Input{
		"current unknown": {Stack: "s", Owner: owner, Live: live},
		"foreign unread": {Stack: "s", Owner: owner, Current: decl(), Live: live,
			History: []Claim{{Revision: 3, Owner: foreign, Err: errors.New("corrupt")}}},
	} {
		p := Decide(in)
		if len(p.Delete) != 0 || !slices.Equal(keys(p.Kept), []string{"service/s_gone"}) {
			t.Errorf("%s: Delete %v, Kept %v", name, keys(p.Delete), keys(p.Kept))
		}
	}
}

func TestDecide_aRotatedVersionOnlyAStampProvesRanksBelowRecordedOnesForRetention(t *testing.T) {
	// Revision 1 mounted -aaaaaaaaaa; a deploy that crashed created
	// -cccccccccc; the current revision mounts -bbbbbbbbbb. With one
	// superseded version retained, the recorded one stays.
	p := Decide(Input{
		Stack:         "s",
		Owner:         owner,
		Current:       decl("config/s_conf-bbbbbbbbbb"),
		History:       []Claim{{Revision: 1, Owner: owner, Declared: decl("config/s_conf-aaaaaaaaaa")}},
		RetainRotated: 1,
		Live: stamped(liveOf("config/s_conf-aaaaaaaaaa", "config/s_conf-bbbbbbbbbb", "config/s_conf-cccccccccc"),
			map[string]string{"config/s_conf-aaaaaaaaaa": owner, "config/s_conf-bbbbbbbbbb": owner, "config/s_conf-cccccccccc": owner}),
	})
	if got := keys(p.Delete); !slices.Equal(got, []string{"config/s_conf-cccccccccc"}) {
		t.Fatalf("Delete = %v, want only the version no record declares", got)
	}
	if got := keys(p.Kept); !slices.Equal(got, []string{"config/s_conf-aaaaaaaaaa"}) {
		t.Fatalf("Kept = %v, want the recorded superseded version", got)
	}
}

func TestRun_removesWhatACrashedDeployLeftWhenTheBackendReadsOwnerStamps(t *testing.T) {
	s := newStore()
	s.configs["s_left"] = "id-s_left"
	s.owners = map[string]string{"config/s_left": owner}
	rep := mustRun(t, &fullFake{core{s}, drift{s}, declarer{s}, lister{s}, remover{s}, stamper{s}}, runInput(s))
	if !slices.Contains(keys(rep.Removed), "config/s_left") {
		t.Fatalf("removed %v, want the stamped leftover among them", keys(rep.Removed))
	}

	// Without OwnerStamps the same leftover is reported and kept.
	s = newStore()
	s.configs["s_left"] = "id-s_left"
	s.owners = map[string]string{"config/s_left": owner}
	rep = mustRun(t, &fakeNoStamps{core{s}, drift{s}, declarer{s}, lister{s}, remover{s}}, runInput(s))
	if slices.Contains(keys(rep.Removed), "config/s_left") || !slices.Contains(keys(rep.Plan.Unmanaged), "config/s_left") {
		t.Fatalf("without OwnerStamps: removed %v, unmanaged %v", keys(rep.Removed), keys(rep.Plan.Unmanaged))
	}
	if hasLine(rep.Degraded, "backend lacks OwnerStamps") != 1 {
		t.Fatalf("Degraded = %q, want OwnerStamps named", rep.Degraded)
	}
}
