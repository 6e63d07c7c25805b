package chartrepo

import (
	"archive/tar"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"strings"
)

// Limits bound what one archive may unpack to. The defaults match what
// chartengine accepts for a chart in git.
type Limits struct {
	// Files is the most entries (files and directories). Default 4096.
	Files int
	// Bytes is the most content, summed over files, after decompression.
	// Default 32 MiB.
	Bytes int64
}

func (l Limits) withDefaults() Limits {
	if l.Files <= 0 {
		l.Files = 4096
	}
	if l.Bytes <= 0 {
		l.Bytes = 32 << 20
	}
	return l
}

// unpack writes the gzipped tar in r under dest, which must exist and be
// empty, and returns the one top-level directory every entry is under (a
// chart archive holds "<name>/..."). Only regular files and directories are
// written, with fixed modes; an absolute name, a name with "..", a link, a
// device, a second top-level directory, a duplicate or an entry past the
// limits fails the whole archive. The caller removes dest on error.
func unpack(r io.Reader, dest string, lim Limits) (string, error) {
	lim = lim.withDefaults()
	gz, err := gzip.NewReader(r)
	if err != nil {
		return "", fmt.Errorf("%w: not gzip: %w", ErrBadArchive, err)
	}
	defer gz.Close()
	tr := tar.NewReader(gz)
	var (
		top     string
		entries int
		total   int64
		seen    = map[string]bool{}
	)
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return "", fmt.Errorf("%w: %w", ErrBadArchive, err)
		}
		if hdr.Typeflag == tar.TypeXGlobalHeader {
			continue
		}
		name, err := entryName(hdr.Name)
		if err != nil {
			return "", err
		}
		first, _, _ := strings.Cut(name, "/")
		switch {
		case top == "":
			top = first
		case first != top:
			return "", fmt.Errorf("%w: entry %q is outside the chart directory %q", ErrBadArchive, hdr.Name, top)
		}
		if seen[name] {
			return "", fmt.Errorf("%w: entry %q appears twice", ErrBadArchive, hdr.Name)
		}
		seen[name] = true
		if entries++; entries > lim.Files {
			return "", fmt.Errorf("%w: more than %d entries", ErrTooLarge, lim.Files)
		}
		target := filepath.Join(dest, filepath.FromSlash(name))
		switch hdr.Typeflag {
		case tar.TypeDir:
			if err := os.MkdirAll(target, 0o755); err != nil {
				return "", err
			}
		case tar.TypeReg:
			if hdr.Size < 0 || hdr.Size > lim.Bytes-total {
				return "", fmt.Errorf("%w: more than %d bytes unpacked", ErrTooLarge, lim.Bytes)
			}
			if err := os.MkdirAll(filepath.Dir(target), 0o755); err != nil {
				return "", err
			}
			n, err := writeFile(target, tr, hdr.Size)
			total += n
			if err != nil {
				return "", fmt.Errorf("unpack %s: %w", name, err)
			}
		default:
			return "", fmt.Errorf("%w: entry %q is a %s, only files and directories are allowed", ErrBadArchive, hdr.Name, typeName(hdr.Typeflag))
		}
	}
	if top == "" {
		return "", fmt.Errorf("%w: the archive is empty", ErrBadArchive)
	}
	return top, nil
}

// entryName cleans a tar entry's name, refusing one that could land
// outside the destination.
func entryName(raw string) (string, error) {
	if raw == "" || strings.ContainsAny(raw, "\\\x00") || path.IsAbs(raw) || filepath.IsAbs(raw) || filepath.VolumeName(raw) != "" {
		return "", fmt.Errorf("%w: entry %q: absolute or unusual name", ErrBadArchive, raw)
	}
	for _, part := range strings.Split(raw, "/") {
		if part == ".." {
			return "", fmt.Errorf("%w: entry %q climbs out of the chart with \"..\"", ErrBadArchive, raw)
		}
	}
	name := path.Clean(raw)
	if name == "." {
		return "", fmt.Errorf("%w: entry %q names no file", ErrBadArchive, raw)
	}
	return name, nil
}

// writeFile creates name (which must not exist) with exactly size bytes
// from r.
func writeFile(name string, r io.Reader, size int64) (int64, error) {
	f, err := os.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return 0, err
	}
	n, err := io.Copy(f, io.LimitReader(r, size))
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil && n != size {
		err = io.ErrUnexpectedEOF
	}
	return n, err
}

func typeName(t byte) string {
	switch t {
	case tar.TypeSymlink:
		return "symbolic link"
	case tar.TypeLink:
		return "hard link"
	case tar.TypeChar, tar.TypeBlock:
		return "device"
	case tar.TypeFifo:
		return "named pipe"
	}
	return fmt.Sprintf("entry of type %q", t)
}
