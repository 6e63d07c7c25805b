package charts

// Action is what planning decides for one release.
type Action string

// The planning outcomes.
const (
	// Install: no release record exists yet.
	Install Action = "install"
	// Upgrade: the manifest or the owner differs from the newest record.
	Upgrade Action = "upgrade"
	// Unchanged: the newest record has this manifest and this owner.
	Unchanged Action = "unchanged"
)

// Plan decides what to do with a rendered manifest given the release's
// newest record (nil when there is none). It is a pure function of the
// manifest text and owner stamp: commit and time do not matter, so a commit
// that renders the same manifest plans as unchanged.
func Plan(manifest, owner string, latest *Release) Action {
	switch {
	case latest == nil:
		return Install
	case latest.Manifest != manifest || latest.Owner != owner:
		return Upgrade
	default:
		return Unchanged
	}
}
