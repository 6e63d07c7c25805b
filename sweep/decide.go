// Package sweep removes what a repository stopped declaring, and nothing else.
//
// Decide is the whole policy and does no I/O: given what the swarm holds in a
// stack's namespace, what the current revision declares and what every stored
// revision declared, it sorts each live resource into delete, keep or
// unmanaged. Run gathers those inputs through a backend's capabilities,
// applies the plan in a safe order and reports what it could not do.
//
// The rule Decide never bends: a resource is deleted only when a stored
// revision recorded by this application declared it, no newer revision of
// someone else claims it, and the current revision does not declare it.
// The one other proof it accepts is this application's owner stamp on a
// resource no record claims at all: the deploy that created it was stopped
// before its record was written. Anything carrying the namespace without
// either proof is reported, never touched.
package sweep

import (
	"cmp"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/flotilla-gitops/flotilla/compose"
)

// Kind is the kind of a swarm resource a stack can own.
type Kind string

// The kinds, in the order a plan deletes them: services first, so that what
// they used is no longer in use when its turn comes; volumes last, because
// they hold data and nothing depends on them.
const (
	KindService Kind = "service"
	KindNetwork Kind = "network"
	KindConfig  Kind = "config"
	KindSecret  Kind = "secret"
	KindVolume  Kind = "volume"
)

// kinds lists every Kind in deletion order.
var kinds = []Kind{KindService, KindNetwork, KindConfig, KindSecret, KindVolume}

// StuckAfter is how many consecutive failed deletions make a resource worth
// reporting loudly. It is still retried on every pass, never forced.
const StuckAfter = 3

// rotationHexLen is the length of the content hash compose puts at the end of
// a config or secret name.
const rotationHexLen = 10

// Key names one resource across kinds: Input.Failures and Live.ServiceRefs
// are keyed by it, because a config and a secret may share a name.
func Key(k Kind, name string) string { return string(k) + "/" + name }

// Item is one live resource and what the plan does with it.
type Item struct {
	Kind Kind
	Name string
	ID   string
	// Reason says why the item is in its list, in words for an operator.
	Reason string
	// Failures counts the consecutive failed deletions of this resource
	// before this pass (from Input.Failures).
	Failures int
}

// Key is Key(i.Kind, i.Name).
func (i Item) Key() string { return Key(i.Kind, i.Name) }

func (i Item) String() string { return string(i.Kind) + " " + i.Name }

// Claim is what one stored revision declared, newest first in Input.History.
type Claim struct {
	Revision int
	// Owner is the revision's stamp, "<controller-id>/<application>".
	Owner string
	// Declared is nil when the record could not be converted; Err says why.
	Declared *compose.Stack
	Err      error
}

// Live is what the swarm holds in the stack's namespace. Each map goes from
// the name the resource has on the swarm to its id (for volumes, the name
// itself will do). A nil map is an empty listing: the caller leaves out a
// kind it could not list, and Decide then neither deletes nor reports it.
type Live struct {
	Services map[string]string
	Networks map[string]string
	Configs  map[string]string
	Secrets  map[string]string
	Volumes  map[string]string
	// ServiceRefs maps a network, config, secret or volume (by Key) to the
	// scoped names of the live services that use it, in their current or
	// previous spec. RefsOf builds it from service specs.
	ServiceRefs map[string][]string
	// RefsKnown says ServiceRefs was read. Without it no network, config,
	// secret or volume is deleted: one a live service still uses could not
	// be told apart from one nothing uses.
	RefsKnown bool
	// Owners maps a resource (by Key) to the owner stamp it carries. A
	// stamp of this application proves a resource no record claims: one a
	// deploy created before it was stopped, never to record its revision.
	// Nil when stamps could not be read; records are then the only proof.
	Owners map[string]string
}

// Input is everything Decide looks at.
type Input struct {
	// Stack is the namespace swept.
	Stack string
	// Owner is this application's stamp, "<controller-id>/<application>".
	Owner string
	// Owners are further stamps that count as this application. A renamed
	// application passes its old stamps here so the records its old name
	// wrote still prove its resources; only the caller knows about a rename.
	// A record from any other controller id or application proves nothing.
	Owners []string
	// Current is what the revision being applied declares. Nil means it is
	// unknown and nothing is deleted; an application removed from the
	// applications file passes an empty Stack, which declares nothing.
	Current *compose.Stack
	// History holds one claim per stored record of the stack, newest first.
	History []Claim
	Live    Live
	// RetainRotated is how many superseded versions of a still-declared
	// config or secret are kept for a Swarm rollback. Below 0 counts as 0.
	RetainRotated int
	// PruneVolumes allows volumes to be deleted at all.
	PruneVolumes bool
	// VolumesCoverSwarm says the volume listing covered every node of the
	// swarm. A volume is local to a node: without this, deleting the one
	// listed would leave its namesakes elsewhere, so none is deleted.
	VolumesCoverSwarm bool
	// Nodes names the swarm's nodes (hostnames) when it has more than one
	// and they are known. A kept volume's reason then says where to run
	// the command that removes it, and a volume this application declared
	// that the listing lacks is reported too: the listing covers one node,
	// and the volume may remain on the others.
	Nodes []string
	// Failures maps a resource (by Key) to its consecutive failed deletions.
	Failures map[string]int
}

// Plan is the decision: each live resource in the namespace that the
// current revision does not declare lands in exactly one of Delete,
// Unmanaged and Kept. Each list is in deletion order, then by name.
type Plan struct {
	// Delete is what may go, in the order it must go.
	Delete []Item
	// Unmanaged carries the namespace but no record of this application
	// declared it: created by hand, by someone else, or before the oldest
	// record still kept. Reported, never touched. A resource older than the
	// kept history lands here too: without the record nothing tells it
	// apart from a hand-made one, and a guess is not proof.
	Unmanaged []Item
	// Kept was proven this application's but must stay for the Reason given.
	Kept []Item
	// Unproven describes records that could not be converted, so whatever
	// they declared proves nothing on this pass.
	Unproven []string
}

// claimed is what History says about one resource.
type claimed struct {
	own     int // index in History of the newest own record declaring it; -1 if none
	foreign int // index of the newest other owner's record declaring it; -1 if none
}

// Decide sorts the stack's live resources into what may be deleted, what is
// kept and why, and what is not this application's to touch.
func Decide(in Input) Plan {
	var p Plan
	owners := map[string]bool{}
	for _, o := range append([]string{in.Owner}, in.Owners...) {
		if o != "" {
			owners[o] = true
		}
	}

	// The newest unreadable record of another owner: a claim of ours older
	// than it may have been handed over by it, and that cannot be checked.
	foreignUnread := -1
	var ownUnread []int
	claims := map[string]*claimed{}
	for i, c := range in.History {
		if c.Declared == nil {
			err := c.Err
			if err == nil {
				err = errors.New("no declaration")
			}
			p.Unproven = append(p.Unproven, fmt.Sprintf("revision %d (%s): %v", c.Revision, c.Owner, err))
			if owners[c.Owner] {
				ownUnread = append(ownUnread, c.Revision)
			} else if foreignUnread < 0 {
				foreignUnread = i
			}
			continue
		}
		for _, k := range kinds {
			for _, name := range created(c.Declared, k) {
				key := Key(k, name)
				cl := claims[key]
				if cl == nil {
					cl = &claimed{own: -1, foreign: -1}
					claims[key] = cl
				}
				switch {
				case owners[c.Owner] && cl.own < 0:
					cl.own = i
				case !owners[c.Owner] && cl.foreign < 0:
					cl.foreign = i
				}
			}
		}
	}

	current := map[string]bool{}
	if in.Current != nil {
		for _, k := range kinds {
			for _, name := range used(in.Current, k) {
				current[Key(k, name)] = true
			}
		}
	}
	// Families of rotated configs and secrets the current revision still
	// declares: only their superseded versions are worth keeping for a
	// rollback. A config dropped from the repository is simply gone.
	currentFamilies := map[string]bool{}
	for _, k := range []Kind{KindConfig, KindSecret} {
		for _, name := range used(in.Current, k) {
			if f, ok := family(in.Stack, name); ok {
				currentFamilies[Key(k, f)] = true
			}
		}
	}

	deleting := map[string]bool{} // scoped names of services this plan deletes
	for _, k := range kinds {
		var proven []Item
		for _, name := range sortedKeys(live(in.Live, k)) {
			it := Item{Kind: k, Name: name, ID: live(in.Live, k)[name], Failures: in.Failures[Key(k, name)]}
			if current[it.Key()] {
				continue
			}
			cl := claims[it.Key()]
			stamped := cl == nil && owners[in.Live.Owners[it.Key()]]
			switch {
			case stamped && foreignUnread >= 0:
				c := in.History[foreignUnread]
				it.Reason = fmt.Sprintf("carries this application's owner stamp, but revision %d of %s could not be read and may claim it", c.Revision, c.Owner)
				p.Kept = append(p.Kept, it)
			case stamped && in.Current == nil:
				it.Reason = "what the current revision declares is unknown, so nothing is deleted"
				p.Kept = append(p.Kept, it)
			case stamped:
				it.Reason = "carries this application's owner stamp and no stored revision declares it: left by a deploy that stopped before recording its revision"
				proven = append(proven, it)
			case cl == nil || cl.own < 0:
				it.Reason = unmanagedReason(in.History, cl, ownUnread)
				p.Unmanaged = append(p.Unmanaged, it)
			case cl.foreign >= 0 && cl.foreign < cl.own:
				c := in.History[cl.foreign]
				it.Reason = fmt.Sprintf("declared since by revision %d of %s", c.Revision, c.Owner)
				p.Kept = append(p.Kept, it)
			case foreignUnread >= 0 && foreignUnread < cl.own:
				c := in.History[foreignUnread]
				it.Reason = fmt.Sprintf("revision %d of %s is newer than this application's claim and could not be read", c.Revision, c.Owner)
				p.Kept = append(p.Kept, it)
			case in.Current == nil:
				it.Reason = "what the current revision declares is unknown, so nothing is deleted"
				p.Kept = append(p.Kept, it)
			default:
				it.Reason = fmt.Sprintf("declared by revision %d, not by the current one", in.History[cl.own].Revision)
				proven = append(proven, it)
			}
		}
		del, kept := judge(in, k, proven, claims, currentFamilies, deleting)
		p.Delete = append(p.Delete, del...)
		p.Kept = append(p.Kept, kept...)
		if k == KindService {
			for _, it := range del {
				deleting[it.Name] = true
			}
		}
	}
	p.Kept = append(p.Kept, elsewhere(in, claims, current)...)
	sortItems(p.Unmanaged)
	sortItems(p.Kept)
	return p
}

// removeOnEachNode is the instruction for a volume Flotilla leaves: a named
// volume is local to a node, so it goes by one command on every node that
// has it, which only the operator can reach.
func removeOnEachNode(in Input, name string) string {
	where := "each node"
	if len(in.Nodes) > 0 {
		where += " (" + strings.Join(in.Nodes, ", ") + ")"
	}
	return "to remove it, run on " + where + ": docker volume rm " + name
}

// elsewhere reports the volumes this application's records declared, the
// current revision does not, and the listing lacks, on a swarm of several
// nodes: the listing is the manager's node's, and a volume created where a
// task ran on another node is still there. Nothing is deleted for them;
// they are Kept with the command that removes them.
func elsewhere(in Input, claims map[string]*claimed, current map[string]bool) []Item {
	if len(in.Nodes) < 2 || in.Live.Volumes == nil || in.Current == nil {
		return nil
	}
	var out []Item
	for key, cl := range claims {
		name, ok := strings.CutPrefix(key, string(KindVolume)+"/")
		if !ok || current[key] || cl.own < 0 || (cl.foreign >= 0 && cl.foreign < cl.own) {
			continue
		}
		if _, listed := in.Live.Volumes[name]; listed {
			continue
		}
		out = append(out, Item{Kind: KindVolume, Name: name, ID: name,
			Reason: fmt.Sprintf("declared by revision %d and not on the node the listing covers, but it may remain on the other nodes; %s",
				in.History[cl.own].Revision, removeOnEachNode(in, name))})
	}
	return out
}

// judge decides, among proven resources of one kind, which are still needed.
// Services never are: nothing depends on a service the repository dropped.
// The rest stay while a service that is not itself going uses them, and
// rotated configs and secrets keep their newest superseded versions.
func judge(in Input, k Kind, proven []Item, claims map[string]*claimed, currentFamilies, deleting map[string]bool) (del, kept []Item) {
	if k == KindService {
		return proven, nil
	}
	var retained map[string]bool
	if k == KindConfig || k == KindSecret {
		retained = retain(in, k, proven, claims, currentFamilies)
	}
	for _, it := range proven {
		users := stillUsedBy(in.Live.ServiceRefs[it.Key()], deleting)
		switch {
		case k == KindVolume && !in.PruneVolumes:
			it.Reason = "pruneVolumes is off; " + removeOnEachNode(in, it.Name)
			kept = append(kept, it)
		case k == KindVolume && !in.VolumesCoverSwarm:
			it.Reason = "the volume listing may not cover every node; " + removeOnEachNode(in, it.Name)
			kept = append(kept, it)
		case retained[it.Name]:
			it.Reason = fmt.Sprintf("kept for rollback: one of the %d newest superseded versions (retainRotated)", in.RetainRotated)
			kept = append(kept, it)
		case !in.Live.RefsKnown:
			it.Reason = "whether a live service still uses it is unknown"
			kept = append(kept, it)
		case len(users) > 0:
			it.Reason = "in use by service " + strings.Join(users, ", ")
			kept = append(kept, it)
		default:
			del = append(del, it)
		}
	}
	return del, kept
}

// retain ranks the superseded versions in each still-declared family by the
// newest of this application's records that declared them, and returns those
// within RetainRotated. Versions in use count towards the window: it holds
// the newest versions, whether or not a service still mounts them.
func retain(in Input, k Kind, proven []Item, claims map[string]*claimed, currentFamilies map[string]bool) map[string]bool {
	families := map[string][]Item{}
	for _, it := range proven {
		if f, ok := family(in.Stack, it.Name); ok && currentFamilies[Key(k, f)] {
			families[f] = append(families[f], it)
		}
	}
	out := map[string]bool{}
	for _, members := range families {
		// A version proven by its stamp alone belongs to no revision a
		// rollback could return to, so it ranks below every recorded one.
		rank := func(it Item) int {
			if c := claims[it.Key()]; c != nil && c.own >= 0 {
				return c.own
			}
			return len(in.History)
		}
		slices.SortFunc(members, func(a, b Item) int {
			return cmp.Or(cmp.Compare(rank(a), rank(b)), cmp.Compare(a.Name, b.Name))
		})
		for i := 0; i < len(members) && i < in.RetainRotated; i++ {
			out[members[i].Name] = true
		}
	}
	return out
}

// family returns the name a content-hashed config or secret shares with its
// other versions: "<stack>_<key>" for "<stack>_<key>-<10 hex>".
func family(stack, name string) (string, bool) {
	i := strings.LastIndexByte(name, '-')
	if i < 0 || len(name)-i-1 != rotationHexLen || !strings.HasPrefix(name[:i], stack+"_") {
		return "", false
	}
	for _, c := range name[i+1:] {
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return "", false
		}
	}
	return name[:i], true
}

// stillUsedBy drops the services the plan deletes from a list of users: they
// go first, so what only they used is free by the time its turn comes.
func stillUsedBy(users []string, deleting map[string]bool) []string {
	var out []string
	for _, u := range users {
		if !deleting[u] {
			out = append(out, u)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// unmanagedReason says what little is known about a resource no record of
// this application declares.
func unmanagedReason(history []Claim, cl *claimed, ownUnread []int) string {
	switch {
	case cl != nil && cl.foreign >= 0:
		c := history[cl.foreign]
		return fmt.Sprintf("declared by revision %d of %s, not by this application", c.Revision, c.Owner)
	case len(ownUnread) > 0:
		return fmt.Sprintf("not declared by any readable revision; revision %s could not be read", joinInts(ownUnread))
	default:
		return "no stored revision of this application declares it: created by hand, by another tool, or before the oldest kept revision"
	}
}

// created lists the names of what s creates of kind k: what a revision
// declaring it proves. External objects are used, not created, so they
// prove nothing.
func created(s *compose.Stack, k Kind) []string {
	if s == nil {
		return nil
	}
	switch k {
	case KindService:
		return sortedKeys(s.Services)
	case KindNetwork:
		return sortedKeys(s.Networks)
	case KindConfig:
		return sortedKeys(s.Configs)
	case KindSecret:
		return sortedKeys(s.Secrets)
	case KindVolume:
		return s.Volumes
	}
	return nil
}

// used lists everything of kind k that s needs to exist, created or
// external: none of it may be swept while s is current.
func used(s *compose.Stack, k Kind) []string {
	if s == nil {
		return nil
	}
	out := created(s, k)
	switch k {
	case KindNetwork:
		out = append(slices.Clip(out), s.ExternalNetworks...)
	case KindConfig:
		out = append(slices.Clip(out), s.ExternalConfigs...)
	case KindSecret:
		out = append(slices.Clip(out), s.ExternalSecrets...)
	case KindVolume:
		out = append(slices.Clip(out), s.ExternalVolumes...)
	}
	return out
}

// live returns the listing of kind k.
func live(l Live, k Kind) map[string]string {
	switch k {
	case KindService:
		return l.Services
	case KindNetwork:
		return l.Networks
	case KindConfig:
		return l.Configs
	case KindSecret:
		return l.Secrets
	case KindVolume:
		return l.Volumes
	}
	return nil
}

// sortItems orders items by deletion order of their kind, then by name.
func sortItems(items []Item) {
	slices.SortStableFunc(items, func(a, b Item) int {
		return cmp.Or(cmp.Compare(slices.Index(kinds, a.Kind), slices.Index(kinds, b.Kind)), cmp.Compare(a.Name, b.Name))
	})
}

func sortedKeys[V any](m map[string]V) []string { return slices.Sorted(maps.Keys(m)) }

func joinInts(n []int) string {
	s := make([]string, len(n))
	for i, v := range n {
		s[i] = fmt.Sprint(v)
	}
	return strings.Join(s, ", ")
}
