package charts

import "testing"

func TestPlan(t *testing.T) {
	rec := &Release{Name: "shop", Revision: 3, Owner: "ctl/shop", Manifest: "m1", Commit: "aaa"}
	tests := []struct {
		name     string
		manifest string
		owner    string
		latest   *Release
		want     Action
	}{
		{"no record installs", "m1", "ctl/shop", nil, Install},
		{"same manifest and owner is unchanged", "m1", "ctl/shop", rec, Unchanged},
		{"new manifest upgrades", "m2", "ctl/shop", rec, Upgrade},
		{"new owner upgrades", "m1", "ctl/other", rec, Upgrade},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Plan(tt.manifest, tt.owner, tt.latest); got != tt.want {
				t.Fatalf("Plan() = %s, want %s", got, tt.want)
			}
		})
	}
}
