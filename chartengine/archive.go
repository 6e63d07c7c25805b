package chartengine

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"path"
	"slices"
	"strings"

	"github.com/flotilla-gitops/flotilla/fault"
)

// ErrArchive: a packaged chart is not a gzipped tar holding one chart
// directory of regular files, within the limits a chart in git has.
var ErrArchive = errors.New("invalid chart archive")

// LoadArchive reads a packaged chart (what Package writes: a gzipped tar
// with every file under "<name>/") into memory. shown names the archive in
// messages, such as its file name. Only regular files and directories are
// accepted: a link, a device, an absolute name or one with "..", a second
// top-level directory or a chart past the limits refuses the archive.
// Nothing is written to disk.
func LoadArchive(r io.Reader, shown string) (*Chart, error) {
	all, top, err := readArchive(r)
	if err != nil {
		return nil, &fault.Error{File: shown, Err: err}
	}
	c := &Chart{Path: top, shown: shown, all: all}
	if err := c.build(); err != nil {
		return nil, err
	}
	if c.Meta.Name != top {
		return nil, &fault.Error{File: shown, Err: fmt.Errorf("%w: chart %q is packaged under %q", ErrArchive, c.Meta.Name, top)}
	}
	return c, nil
}

// readArchive returns the files of the one directory an archive holds,
// relative to it, and that directory's name.
func readArchive(r io.Reader) (map[string][]byte, string, error) {
	gz, err := gzip.NewReader(io.LimitReader(r, maxChartBytes+1))
	if err != nil {
		return nil, "", fmt.Errorf("%w: not gzip: %v", ErrArchive, err)
	}
	defer gz.Close()
	tr := tar.NewReader(gz)
	all := map[string][]byte{}
	top, total, entries := "", 0, 0
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, "", fmt.Errorf("%w: %v", ErrArchive, err)
		}
		if hdr.Typeflag == tar.TypeXGlobalHeader {
			continue
		}
		if entries++; entries > maxChartFiles {
			return nil, "", fmt.Errorf("%w: more than %d entries", ErrArchive, maxChartFiles)
		}
		name := hdr.Name
		if name == "" || strings.ContainsAny(name, "\\\x00") || path.IsAbs(name) || slices.Contains(strings.Split(name, "/"), "..") {
			return nil, "", fmt.Errorf("%w: entry %q is absolute or climbs out with \"..\"", ErrArchive, hdr.Name)
		}
		name = path.Clean(name)
		first, rest, _ := strings.Cut(name, "/")
		switch {
		case top == "":
			top = first
		case first != top:
			return nil, "", fmt.Errorf("%w: entry %q is outside the chart directory %q", ErrArchive, hdr.Name, top)
		}
		switch hdr.Typeflag {
		case tar.TypeDir:
			continue
		case tar.TypeReg:
		case tar.TypeSymlink, tar.TypeLink:
			return nil, "", fmt.Errorf("%w: %w: entry %q is a link", ErrArchive, ErrSymlink, hdr.Name)
		default:
			return nil, "", fmt.Errorf("%w: entry %q is not a regular file", ErrArchive, hdr.Name)
		}
		if rest == "" {
			return nil, "", fmt.Errorf("%w: entry %q is a file at the top level; a chart archive holds one directory", ErrArchive, hdr.Name)
		}
		if _, dup := all[rest]; dup {
			return nil, "", fmt.Errorf("%w: entry %q appears twice", ErrArchive, hdr.Name)
		}
		if hdr.Size < 0 || hdr.Size > int64(maxChartBytes-total) {
			return nil, "", fmt.Errorf("%w: the chart is larger than %d MiB", ErrArchive, maxChartBytes>>20)
		}
		var b bytes.Buffer
		if _, err := io.CopyN(&b, tr, hdr.Size); err != nil {
			return nil, "", fmt.Errorf("%w: entry %q: %v", ErrArchive, hdr.Name, err)
		}
		total += b.Len()
		all[rest] = b.Bytes()
	}
	if top == "" {
		return nil, "", fmt.Errorf("%w: the archive is empty", ErrArchive)
	}
	return all, top, nil
}
