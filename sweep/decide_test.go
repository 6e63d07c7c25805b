package sweep

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/moby/moby/api/types/swarm"
	"github.com/moby/moby/client"

	"github.com/flotilla-gitops/flotilla/compose"
)

const (
	owner   = "ctl-a/shop"
	foreign = "ctl-b/shop"
)

// decl builds a Stack declaring the given keys ("config/s_app-0123456789").
// An "external " prefix declares the object as used but not created.
func decl(keys ...string) *compose.Stack {
	s := &compose.Stack{
		Namespace: "s",
		Services:  map[string]swarm.ServiceSpec{},
		Networks:  map[string]client.NetworkCreateOptions{},
		Configs:   map[string]swarm.ConfigSpec{},
		Secrets:   map[string]swarm.SecretSpec{},
	}
	for _, k := range keys {
		external := strings.HasPrefix(k, "external ")
		kind, name, _ := strings.Cut(strings.TrimPrefix(k, "external "), "/")
		switch {
		case kind == "service":
			s.Services[name] = swarm.ServiceSpec{Annotations: swarm.Annotations{Name: name}}
		case kind == "network" && external:
			s.ExternalNetworks = append(s.ExternalNetworks, name)
		case kind == "network":
			s.Networks[name] = client.NetworkCreateOptions{}
		case kind == "config" && external:
			s.ExternalConfigs = append(s.ExternalConfigs, name)
		case kind == "config":
			s.Configs[name] = swarm.ConfigSpec{Annotations: swarm.Annotations{Name: name}}
		case kind == "secret" && external:
			s.ExternalSecrets = append(s.ExternalSecrets, name)
		case kind == "secret":
			s.Secrets[name] = swarm.SecretSpec{Annotations: swarm.Annotations{Name: name}}
		case kind == "volume" && external:
			s.ExternalVolumes = append(s.ExternalVolumes, name)
		case kind == "volume":
			s.Volumes = append(s.Volumes, name)
		default:
			panic("bad key " + k)
		}
	}
	return s
}

// liveOf lists the given keys as live, each with id "id-<name>", with
// service references known and empty.
func liveOf(keys ...string) Live {
	l := Live{
		Services: map[string]string{}, Networks: map[string]string{}, Configs: map[string]string{},
		Secrets: map[string]string{}, Volumes: map[string]string{}, ServiceRefs: map[string][]string{},
		RefsKnown: true,
	}
	for _, k := range keys {
		kind, name, _ := strings.Cut(k, "/")
		live(l, Kind(kind))[name] = "id-" + name
	}
	return l
}

func withRefs(l Live, refs map[string][]string) Live {
	l.ServiceRefs = refs
	return l
}

func keys(items []Item) []string {
	out := []string{}
	for _, it := range items {
		out = append(out, it.Key())
	}
	return out
}

func reasonOf(p Plan, key string) string {
	for _, list := range [][]Item{p.Delete, p.Unmanaged, p.Kept} {
		for _, it := range list {
			if it.Key() == key {
				return it.Reason
			}
		}
	}
	return ""
}

func TestDecide(t *testing.T) {
	const (
		c1 = "config/s_app-1111111111"
		c2 = "config/s_app-2222222222"
		c3 = "config/s_app-3333333333"
		c4 = "config/s_app-4444444444"
		c5 = "config/s_app-5555555555"
	)
	everything := []string{"service/s_web", "service/s_api", "network/s_default", "network/s_back",
		"config/s_conf", "config/s_old", "secret/s_key", "secret/s_oldkey"}
	tests := []struct {
		name      string
		in        Input
		delete    []string // in order
		unmanaged []string
		kept      []string
		unproven  int
		reasons   map[string]string // key -> substring of its reason
	}{
		{
			name: "removing one of each kind deletes exactly those",
			in: Input{
				Stack: "s", Owner: owner,
				Current: decl("service/s_web", "network/s_default", "config/s_conf", "secret/s_key"),
				History: []Claim{{Revision: 1, Owner: owner, Declared: decl(everything...)}},
				Live:    liveOf(everything...),
			},
			delete: []string{"service/s_api", "network/s_back", "config/s_old", "secret/s_oldkey"},
		},
		{
			name: "a hand-made resource in the namespace is unmanaged",
			in: Input{
				Stack: "s", Owner: owner,
				Current: decl("service/s_web"),
				History: []Claim{{Revision: 1, Owner: owner, Declared: decl("service/s_web")}},
				Live:    liveOf("service/s_web", "service/s_debug", "config/s_handmade"),
			},
			unmanaged: []string{"service/s_debug", "config/s_handmade"},
			reasons:   map[string]string{"service/s_debug": "created by hand"},
		},
		{
			name: "a record of another controller or application proves nothing",
			in: Input{
				Stack: "s", Owner: owner,
				Current: decl(),
				History: []Claim{
					{Revision: 2, Owner: foreign, Declared: decl("service/s_web")},
					{Revision: 1, Owner: "ctl-a/other", Declared: decl("network/s_default")},
				},
				Live: liveOf("service/s_web", "network/s_default"),
			},
			unmanaged: []string{"service/s_web", "network/s_default"},
			reasons:   map[string]string{"service/s_web": "revision 2 of ctl-b/shop"},
		},
		{
			name: "a renamed application's old stamp proves when passed in Owners",
			in: Input{
				Stack: "s", Owner: owner, Owners: []string{"ctl-a/store"},
				Current: decl("service/s_web"),
				History: []Claim{{Revision: 1, Owner: "ctl-a/store", Declared: decl("service/s_web", "service/s_api")}},
				Live:    liveOf("service/s_web", "service/s_api"),
			},
			delete: []string{"service/s_api"},
		},
		{
			name: "a record with no owner proves nothing even when Owner is empty",
			in: Input{
				Stack:   "s",
				Current: decl(),
				History: []Claim{{Revision: 1, Declared: decl("service/s_api")}},
				Live:    liveOf("service/s_api"),
			},
			unmanaged: []string{"service/s_api"},
		},
		{
			name: "kinds are proved separately",
			in: Input{
				Stack: "s", Owner: owner,
				Current: decl(),
				History: []Claim{{Revision: 1, Owner: owner, Declared: decl("service/s_x", "secret/s_y")}},
				Live:    liveOf("service/s_x", "config/s_x", "network/s_x", "secret/s_y", "config/s_y"),
			},
			delete:    []string{"service/s_x", "secret/s_y"},
			unmanaged: []string{"network/s_x", "config/s_x", "config/s_y"},
		},
		{
			name: "an unconvertible record is unproven and the others still prove",
			in: Input{
				Stack: "s", Owner: owner,
				Current: decl("service/s_web"),
				History: []Claim{
					{Revision: 3, Owner: owner, Err: errors.New("config s_gone not found")},
					{Revision: 2, Owner: owner, Declared: decl("service/s_web", "service/s_api")},
				},
				Live: liveOf("service/s_web", "service/s_api", "service/s_worker"),
			},
			delete:    []string{"service/s_api"},
			unmanaged: []string{"service/s_worker"},
			unproven:  1,
			reasons:   map[string]string{"service/s_worker": "revision 3 could not be read"},
		},
		{
			name: "a newer claim by another owner hands the resource over",
			in: Input{
				Stack: "s", Owner: owner,
				Current: decl(),
				History: []Claim{
					{Revision: 3, Owner: foreign, Declared: decl("service/s_api")},
					{Revision: 2, Owner: foreign, Err: errors.New("bad manifest")},
					{Revision: 1, Owner: owner, Declared: decl("service/s_api", "service/s_web")},
				},
				Live: liveOf("service/s_api", "service/s_web"),
			},
			kept:     []string{"service/s_api", "service/s_web"},
			unproven: 1,
			reasons: map[string]string{
				"service/s_api": "declared since by revision 3 of ctl-b/shop",
				"service/s_web": "revision 2 of ctl-b/shop is newer",
			},
		},
		{
			name: "an older claim by another owner does not block this one",
			in: Input{
				Stack: "s", Owner: owner,
				Current: decl(),
				History: []Claim{
					{Revision: 2, Owner: owner, Declared: decl("service/s_api")},
					{Revision: 1, Owner: foreign, Declared: decl("service/s_api")},
				},
				Live: liveOf("service/s_api"),
			},
			delete: []string{"service/s_api"},
		},
		{
			name: "rotated versions beyond retention go, referenced and retained ones stay",
			in: Input{
				Stack: "s", Owner: owner, RetainRotated: 2,
				Current: decl("service/s_web", c5),
				History: []Claim{
					{Revision: 5, Owner: owner, Declared: decl("service/s_web", c5)},
					{Revision: 4, Owner: owner, Declared: decl("service/s_web", c4)},
					{Revision: 3, Owner: owner, Declared: decl("service/s_web", c3)},
					{Revision: 2, Owner: owner, Declared: decl("service/s_web", c2, "secret/s_tls-abcdef0123")},
					{Revision: 1, Owner: owner, Declared: decl("service/s_web", c1, "config/s_dropped-0123456789")},
				},
				Live: withRefs(liveOf("service/s_web", c1, c2, c3, c4, c5, "config/s_dropped-0123456789", "secret/s_tls-abcdef0123"),
					map[string][]string{c2: {"s_web"}, c5: {"s_web"}}),
			},
			delete: []string{"config/s_app-1111111111", "config/s_dropped-0123456789", "secret/s_tls-abcdef0123"},
			kept:   []string{c2, c3, c4},
			reasons: map[string]string{
				c4: "kept for rollback",
				c3: "kept for rollback",
				c2: "in use by service s_web",
			},
		},
		{
			name: "no rotation retention at zero",
			in: Input{
				Stack: "s", Owner: owner,
				Current: decl(c2),
				History: []Claim{{Revision: 1, Owner: owner, Declared: decl(c1)}},
				Live:    liveOf(c1, c2),
			},
			delete: []string{c1},
		},
		{
			name: "what only a deleted service uses goes with it; what a kept one uses stays",
			in: Input{
				Stack: "s", Owner: owner,
				Current: decl(),
				History: []Claim{{Revision: 1, Owner: owner, Declared: decl("service/s_api", "config/s_a", "network/s_n", "secret/s_b")}},
				Live: withRefs(liveOf("service/s_api", "service/s_debug", "config/s_a", "network/s_n", "secret/s_b"),
					map[string][]string{"config/s_a": {"s_api"}, "network/s_n": {"s_api", "s_debug"}, "secret/s_b": {"s_debug"}}),
			},
			delete:    []string{"service/s_api", "config/s_a"},
			unmanaged: []string{"service/s_debug"},
			kept:      []string{"network/s_n", "secret/s_b"},
			reasons:   map[string]string{"network/s_n": "in use by service s_debug"},
		},
		{
			name: "unknown service references keep everything but services",
			in: Input{
				Stack: "s", Owner: owner,
				Current: decl(),
				History: []Claim{{Revision: 1, Owner: owner, Declared: decl("service/s_api", "config/s_a", "network/s_n")}},
				Live: func() Live {
					l := liveOf("service/s_api", "config/s_a", "network/s_n")
					l.RefsKnown = false
					return l
				}(),
			},
			delete:  []string{"service/s_api"},
			kept:    []string{"network/s_n", "config/s_a"},
			reasons: map[string]string{"config/s_a": "unknown"},
		},
		{
			name: "volumes stay without pruneVolumes, with the command to run",
			in: Input{
				Stack: "s", Owner: owner, VolumesCoverSwarm: true,
				Current: decl(),
				History: []Claim{{Revision: 1, Owner: owner, Declared: decl("volume/s_data")}},
				Live:    liveOf("volume/s_data", "volume/s_other"),
			},
			kept:      []string{"volume/s_data"},
			unmanaged: []string{"volume/s_other"},
			reasons:   map[string]string{"volume/s_data": "pruneVolumes is off; to remove it, run on each node: docker volume rm s_data"},
		},
		{
			name: "volumes stay when the listing may not cover the swarm",
			in: Input{
				Stack: "s", Owner: owner, PruneVolumes: true,
				Current: decl(),
				History: []Claim{{Revision: 1, Owner: owner, Declared: decl("volume/s_data")}},
				Live:    liveOf("volume/s_data"),
			},
			kept:    []string{"volume/s_data"},
			reasons: map[string]string{"volume/s_data": "may not cover every node; to remove it, run on each node: docker volume rm s_data"},
		},
		{
			name: "on a swarm of several nodes a kept volume names the nodes to remove it on",
			in: Input{
				Stack: "s", Owner: owner, PruneVolumes: true, Nodes: []string{"n1", "n2", "n3"},
				Current: decl(),
				History: []Claim{{Revision: 1, Owner: owner, Declared: decl("volume/s_data")}},
				Live:    liveOf("volume/s_data"),
			},
			kept:    []string{"volume/s_data"},
			reasons: map[string]string{"volume/s_data": "to remove it, run on each node (n1, n2, n3): docker volume rm s_data"},
		},
		{
			// The manager lists its own node's volumes; a task on a worker
			// made its own copy there.
			name: "on a swarm of several nodes a declared volume the listing lacks is kept with the command, not forgotten",
			in: Input{
				Stack: "s", Owner: owner, PruneVolumes: true, Nodes: []string{"n1", "n2"},
				Current: decl("volume/s_still"),
				History: []Claim{
					{Revision: 3, Owner: "other/app", Declared: decl("volume/s_theirs")},
					{Revision: 2, Owner: owner, Declared: decl("volume/s_worker", "volume/s_still", "volume/s_theirs")},
				},
				Live: liveOf(),
			},
			kept:    []string{"volume/s_worker"},
			reasons: map[string]string{"volume/s_worker": "may remain on the other nodes; to remove it, run on each node (n1, n2): docker volume rm s_worker"},
		},
		{
			name: "on a single node a declared volume the listing lacks is gone",
			in: Input{
				Stack: "s", Owner: owner, PruneVolumes: true, VolumesCoverSwarm: true,
				Current: decl(),
				History: []Claim{{Revision: 2, Owner: owner, Declared: decl("volume/s_worker")}},
				Live:    liveOf(),
			},
		},
		{
			name: "volumes go with pruneVolumes and a listing of the whole swarm",
			in: Input{
				Stack: "s", Owner: owner, PruneVolumes: true, VolumesCoverSwarm: true,
				Current: decl("volume/s_keep", "external volume/s_shared"),
				History: []Claim{{Revision: 1, Owner: owner, Declared: decl("volume/s_data", "volume/s_keep", "volume/s_shared")}},
				Live:    liveOf("volume/s_data", "volume/s_keep", "volume/s_shared"),
			},
			delete: []string{"volume/s_data"},
		},
		{
			name: "deletion order is services, networks, configs, secrets, volumes",
			in: Input{
				Stack: "s", Owner: owner, PruneVolumes: true, VolumesCoverSwarm: true,
				Current: decl(),
				History: []Claim{{Revision: 1, Owner: owner, Declared: decl("volume/s_v", "secret/s_s", "config/s_c", "network/s_n", "service/s_b", "service/s_a")}},
				Live:    liveOf("volume/s_v", "secret/s_s", "config/s_c", "network/s_n", "service/s_b", "service/s_a"),
			},
			delete: []string{"service/s_a", "service/s_b", "network/s_n", "config/s_c", "secret/s_s", "volume/s_v"},
		},
		{
			name: "what the current revision uses, even as external, is never deleted",
			in: Input{
				Stack: "s", Owner: owner,
				Current: decl("external config/s_shared", "external network/s_net", "external secret/s_key"),
				History: []Claim{{Revision: 1, Owner: owner, Declared: decl("config/s_shared", "network/s_net", "secret/s_key")}},
				Live:    liveOf("config/s_shared", "network/s_net", "secret/s_key"),
			},
		},
		{
			name: "an unknown current revision deletes nothing",
			in: Input{
				Stack: "s", Owner: owner,
				History: []Claim{{Revision: 1, Owner: owner, Declared: decl("service/s_api")}},
				Live:    liveOf("service/s_api", "service/s_debug"),
			},
			kept:      []string{"service/s_api"},
			unmanaged: []string{"service/s_debug"},
		},
		{
			name: "an application that declares nothing any more loses everything it proved",
			in: Input{
				Stack: "s", Owner: owner,
				Current: &compose.Stack{Namespace: "s"},
				History: []Claim{{Revision: 1, Owner: owner, Declared: decl("service/s_api", "network/s_default")}},
				Live:    liveOf("service/s_api", "network/s_default", "service/s_debug"),
			},
			delete:    []string{"service/s_api", "network/s_default"},
			unmanaged: []string{"service/s_debug"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := Decide(tt.in)
			if got := keys(p.Delete); !slices.Equal(got, nonNil(tt.delete)) {
				t.Errorf("Delete = %v, want %v", got, tt.delete)
			}
			if got := keys(p.Unmanaged); !sameSet(got, tt.unmanaged) {
				t.Errorf("Unmanaged = %v, want %v", got, tt.unmanaged)
			}
			if got := keys(p.Kept); !sameSet(got, tt.kept) {
				t.Errorf("Kept = %v, want %v", got, tt.kept)
			}
			if len(p.Unproven) != tt.unproven {
				t.Errorf("Unproven = %q, want %d", p.Unproven, tt.unproven)
			}
			for k, want := range tt.reasons {
				if got := reasonOf(p, k); !strings.Contains(got, want) {
					t.Errorf("reason of %s = %q, want it to contain %q", k, got, want)
				}
			}
		})
	}
}

func TestDecide_carriesFailureCounts(t *testing.T) {
	p := Decide(Input{
		Stack: "s", Owner: owner,
		Current:  decl(),
		History:  []Claim{{Revision: 1, Owner: owner, Declared: decl("config/s_c")}},
		Live:     liveOf("config/s_c"),
		Failures: map[string]int{"config/s_c": 2, "secret/s_c": 7},
	})
	if len(p.Delete) != 1 || p.Delete[0].Failures != 2 || p.Delete[0].ID != "id-s_c" {
		t.Fatalf("Delete = %+v, want config s_c with id id-s_c and 2 failures", p.Delete)
	}
}

func TestFamily(t *testing.T) {
	tests := []struct {
		name, want string
		ok         bool
	}{
		{"s_app-0123456789", "s_app", true},
		{"s_a-b-abcdef0123", "s_a-b", true},
		{"s_long.1234abcd-abcdef0123", "s_long.1234abcd", true},
		{"s_app-ABCDEF0123", "", false},
		{"s_app-012345678", "", false},
		{"other_app-0123456789", "", false},
		{"s_app", "", false},
	}
	for _, tt := range tests {
		got, ok := family("s", tt.name)
		if got != tt.want || ok != tt.ok {
			t.Errorf("family(%q) = %q, %v; want %q, %v", tt.name, got, ok, tt.want, tt.ok)
		}
	}
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

func sameSet(a, b []string) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(nonNil(a), nonNil(b))
}
