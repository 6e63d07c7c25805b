package sweep

import (
	"slices"
	"testing"
)

// An object a stack names itself (name: shared-conf) has no stack prefix,
// but it carries the stack's namespace label like every object the stack
// creates and a record declares it by that same name: once the repository
// drops it, the sweep deletes it as it would a scoped one, and a
// same-named object no record of this application declared stays
// unmanaged.
func TestSelfNamedObjectsAreSweptLikeScopedOnes(t *testing.T) {
	all := []string{"service/s_web", "network/team-net", "config/team-conf", "secret/team-secret", "volume/team-data"}
	p := Decide(Input{
		Stack: "s", Owner: owner,
		Current:           decl("service/s_web"),
		History:           []Claim{{Revision: 1, Owner: owner, Declared: decl(all...)}},
		Live:              liveOf(append(all, "config/other-conf")...),
		PruneVolumes:      true,
		VolumesCoverSwarm: true,
	})
	want := []string{"network/team-net", "config/team-conf", "secret/team-secret", "volume/team-data"}
	if got := keys(p.Delete); !slices.Equal(got, want) {
		t.Errorf("delete %v, want %v", got, want)
	}
	if got := keys(p.Unmanaged); !slices.Equal(got, []string{"config/other-conf"}) {
		t.Errorf("unmanaged %v, want config/other-conf", got)
	}
}
