package imagepolicy

import (
	"fmt"
	"strings"

	"github.com/distribution/reference"
)

// Ref is an image reference as a file spells it, split into the repository
// (kept as written, so a rewrite changes only the tag and digest) and the
// tag and digest after it.
type Ref struct {
	Repository string
	Tag        string
	Digest     string
}

// String spells r back as a file would hold it.
func (r Ref) String() string {
	s := r.Repository
	if r.Tag != "" {
		s += ":" + r.Tag
	}
	if r.Digest != "" {
		s += "@" + r.Digest
	}
	return s
}

// ParseRef splits value, which must name image (the policy's repository,
// compared after Docker's normalisation, so "app" and
// "docker.io/library/app" are one image). A value naming another image is
// an error: a repository must not redirect a policy to an image the
// operator did not name.
func ParseRef(value, image string) (Ref, error) {
	named, err := reference.ParseNormalizedNamed(value)
	if err != nil {
		return Ref{}, fmt.Errorf("%q is not an image reference: %w", value, err)
	}
	want, err := reference.ParseNormalizedNamed(image)
	if err != nil {
		return Ref{}, fmt.Errorf("policy image %q: %w", image, err)
	}
	if named.Name() != want.Name() {
		return Ref{}, fmt.Errorf("%q is image %s, not the policy's %s", value, reference.FamiliarName(named), reference.FamiliarName(want))
	}
	r := Ref{Repository: value}
	if i := strings.IndexByte(r.Repository, '@'); i >= 0 {
		r.Repository = r.Repository[:i]
	}
	if t, ok := named.(reference.Tagged); ok {
		r.Tag = t.Tag()
		r.Repository = strings.TrimSuffix(r.Repository, ":"+r.Tag)
	}
	if d, ok := named.(reference.Digested); ok {
		r.Digest = d.Digest().String()
	}
	return r, nil
}

// Next is the reference d leads to from current: the tag replaced for a
// tag policy (any pinned digest dropped, since it pinned the old tag), the
// moving tag and new digest for a digest policy.
func Next(current Ref, d Decision, k Kind) Ref {
	next := Ref{Repository: current.Repository, Tag: d.Tag}
	if k == Digest {
		next.Digest = d.Digest
	}
	return next
}
