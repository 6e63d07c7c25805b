package compose

import (
	"errors"
	"fmt"
	"os"

	"github.com/flotilla-gitops/flotilla/fault"
)

// Default render limits. A compose project is a few kilobytes; the limits
// are there so that one repository cannot make every pass of the controller
// parse tens of megabytes, not to constrain real projects.
const (
	// DefaultMaxFileBytes bounds each file a render reads: compose files,
	// env files, config and secret files. 4 MiB.
	DefaultMaxFileBytes = 4 << 20
	// DefaultMaxManifestBytes bounds the manifest a render writes, which
	// also becomes a release record. 16 MiB.
	DefaultMaxManifestBytes = 16 << 20
)

// ErrTooLarge is a file or a manifest over its render limit.
var ErrTooLarge = errors.New("over the render size limit")

// Limits bound one render. A zero field takes its default; a negative one
// turns that limit off.
type Limits struct {
	// MaxFileBytes is the largest file a render reads. Default
	// DefaultMaxFileBytes.
	MaxFileBytes int64
	// MaxManifestBytes is the largest manifest a render may write. Default
	// DefaultMaxManifestBytes.
	MaxManifestBytes int64
}

func (l Limits) withDefaults() Limits {
	if l.MaxFileBytes == 0 {
		l.MaxFileBytes = DefaultMaxFileBytes
	}
	if l.MaxManifestBytes == 0 {
		l.MaxManifestBytes = DefaultMaxManifestBytes
	}
	return l
}

// checkFileSize refuses a file over the limit before it is read, so a huge
// file costs a stat, not its size in memory.
func (p *project) checkFileSize(rel, abs string) error {
	max := p.limits.MaxFileBytes
	if max < 0 {
		return nil
	}
	st, err := os.Stat(abs)
	if err != nil || !st.Mode().IsRegular() {
		return nil // the read reports it
	}
	if st.Size() > max {
		return fmt.Errorf("%s is %d bytes, limit %d (maxFileBytes): %w", rel, st.Size(), max, ErrTooLarge)
	}
	return nil
}

// checkManifestSize refuses a manifest over the limit.
func (p *project) checkManifestSize(text string) error {
	max := p.limits.MaxManifestBytes
	if max < 0 || int64(len(text)) <= max {
		return nil
	}
	file := p.dir
	if len(p.files) > 0 {
		file = p.files[0].rel
	}
	return &fault.Error{File: file, Field: "manifest", Err: fmt.Errorf(
		"the rendered manifest is %d bytes, limit %d (maxManifestBytes): %w", len(text), max, ErrTooLarge)}
}

// limitField is field when err is a size limit, "" otherwise: a file the
// applications file names is over the limit, and that is the field to change
// (or the limit).
func limitField(err error, field string) string {
	if errors.Is(err, ErrTooLarge) {
		return field
	}
	return ""
}
