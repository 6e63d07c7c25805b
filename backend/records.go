package backend

import (
	"bytes"
	"cmp"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"regexp"
	"slices"
	"strconv"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/api/types/swarm"
	"github.com/moby/moby/client"

	"github.com/flotilla-gitops/flotilla/charts"
	"github.com/flotilla-gitops/flotilla/labels"
)

// Release records are swarm configs, so the history of a release lives in
// the swarm with everything else and a restarted controller loses none of it.
const (
	recordPrefix = "flotilla-release."
	recordKind   = "release"
	// maxRecordSize is Swarm's limit on a config's data.
	maxRecordSize = 500 * 1024
	// maxObjectName is Swarm's limit on a config's name.
	maxObjectName = 64

	// recordFormat is the layout of a record's data this controller
	// writes (labels.RecordFormat); it reads only the formats it knows.
	recordFormat = 1
)

// NewerRecordError is a release record written in a format newer than this
// controller understands, as by a newer controller that has since been
// rolled back. Planning from it, or recording a revision over it, could
// lose what the newer format says, so both are refused until a controller
// that knows the format runs again.
type NewerRecordError struct {
	Record string
	Format int
}

func (e *NewerRecordError) Error() string {
	return fmt.Sprintf("release record %s has format %d, newer than this controller understands (%d); refusing to plan from it or record over it: run a controller that knows format %d",
		e.Record, e.Format, recordFormat, e.Format)
}

// checkFormat refuses a record newer than recordFormat.
func checkFormat(c swarm.Config) error {
	v, ok := c.Spec.Labels[labels.RecordFormat]
	if !ok {
		return nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		return fmt.Errorf("release record %s: label %s=%q is not a format number", c.Spec.Name, labels.RecordFormat, v)
	}
	if n > recordFormat {
		return &NewerRecordError{Record: c.Spec.Name, Format: n}
	}
	return nil
}

// objectNameRE is what Swarm accepts as a config name.
var objectNameRE = regexp.MustCompile(`^[a-zA-Z0-9][a-zA-Z0-9_.-]*$`)

// recordName is the config name of one revision:
// "flotilla-release.<release>.<revision>". A release name that would not fit
// Swarm's name rules is shortened and followed by a hash of the whole name,
// so two long names never share records; the labels carry the full name.
func recordName(release string, revision int) string {
	rev := "." + strconv.Itoa(revision)
	name := recordPrefix + release + rev
	if len(name) <= maxObjectName && objectNameRE.MatchString(name) {
		return name
	}
	sum := sha256.Sum256([]byte(release))
	tag := hex.EncodeToString(sum[:])[:12]
	short := []byte(release)
	for i, c := range short {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
			short[i] = '-'
		}
	}
	room := maxObjectName - len(recordPrefix) - len(rev) - 1 - len(tag)
	if len(short) > room {
		short = short[:room]
	}
	return recordPrefix + string(short) + "-" + tag + rev
}

// Releases returns the recorded revisions of release, newest first. The
// daemon's config listing carries the data, so this is one request.
func (b *Backend) Releases(ctx context.Context, release string) ([]charts.Release, error) {
	recs, err := b.records(ctx, release)
	if err != nil {
		return nil, err
	}
	out := make([]charts.Release, 0, len(recs))
	for _, c := range recs {
		r, err := decodeRecord(c)
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, nil
}

// LatestRelease returns the newest recorded revision of release, or nil when
// there is none. Planning needs only this one, so only it is decoded.
func (b *Backend) LatestRelease(ctx context.Context, release string) (*charts.Release, error) {
	recs, err := b.records(ctx, release)
	if err != nil || len(recs) == 0 {
		return nil, err
	}
	r, err := decodeRecord(recs[0])
	if err != nil {
		return nil, err
	}
	return &r, nil
}

// RecordRelease stores r as a new record and then drops the oldest records
// beyond keep (keep < 1 keeps all). The caller numbers revisions; a
// revision that is already recorded is refused with charts.ErrRecordExists,
// never overwritten. The listing below only saves a write in the common
// case: what makes two writers of one revision impossible is that Swarm
// refuses a second config of the same name, and that refusal is reported
// the same way.
func (b *Backend) RecordRelease(ctx context.Context, r charts.Release, keep int) error {
	if r.Name == "" || r.Revision < 1 {
		return fmt.Errorf("record release %q revision %d: need a name and a revision of 1 or more", r.Name, r.Revision)
	}
	ctx, epoch, err := b.permitWrites(ctx)
	if err != nil {
		return fmt.Errorf("record release %s revision %d: %w", r.Name, r.Revision, err)
	}
	name := recordName(r.Name, r.Revision)
	data, err := encodeRecord(r)
	if err != nil {
		return fmt.Errorf("record release %s revision %d: %w", r.Name, r.Revision, err)
	}
	if len(data) > maxRecordSize {
		return fmt.Errorf("record release %s revision %d: compressed record is %d bytes, over Swarm's config limit of %d",
			r.Name, r.Revision, len(data), maxRecordSize)
	}
	existing, err := b.records(ctx, r.Name)
	if err != nil {
		return fmt.Errorf("record release %s revision %d: %w", r.Name, r.Revision, err)
	}
	for _, c := range existing {
		if err := checkFormat(c); err != nil {
			return fmt.Errorf("record release %s revision %d: %w", r.Name, r.Revision, err)
		}
		if c.Spec.Labels[LabelRevision] == strconv.Itoa(r.Revision) {
			return fmt.Errorf("record release %s revision %d: %w; records are never overwritten", r.Name, r.Revision, charts.ErrRecordExists)
		}
	}
	spec := swarm.ConfigSpec{
		Annotations: swarm.Annotations{
			Name: name,
			Labels: withEpochLabel(map[string]string{
				LabelRecord:   recordKind,
				LabelRelease:  r.Name,
				LabelRevision: strconv.Itoa(r.Revision),
				LabelOwner:    r.Owner,
				LabelCommit:   r.Commit,

				labels.RecordFormat: strconv.Itoa(recordFormat),
			}, epoch),
		},
		Data: data,
	}
	if _, err := b.api.ConfigCreate(ctx, client.ConfigCreateOptions{Spec: spec}); err != nil {
		if cerrdefs.IsConflict(err) || cerrdefs.IsAlreadyExists(err) {
			return fmt.Errorf("record release %s revision %d: config %s: %w (written meanwhile by another writer): %w", r.Name, r.Revision, name, charts.ErrRecordExists, err)
		}
		return fmt.Errorf("record release %s revision %d: create config %s: %w", r.Name, r.Revision, name, err)
	}
	b.log.Info("recorded release", "stack", r.Name, "revision", r.Revision)

	if keep < 1 {
		return nil
	}
	existing = append(existing, swarm.Config{Spec: spec}) // stands for the new record when counting
	sortRecords(existing)
	var errs []error
	for _, c := range existing[min(keep, len(existing)):] {
		if c.ID == "" {
			continue
		}
		if _, err := b.api.ConfigRemove(ctx, c.ID, client.ConfigRemoveOptions{}); err != nil && !isNotFound(err) {
			errs = append(errs, fmt.Errorf("drop record %s: %w", c.Spec.Name, err))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("record release %s revision %d: recorded, but pruning old records failed: %w", r.Name, r.Revision, err)
	}
	return nil
}

// records lists the record configs of release, newest first.
func (b *Backend) records(ctx context.Context, release string) ([]swarm.Config, error) {
	f := make(client.Filters).Add("label", LabelRecord+"="+recordKind).Add("label", LabelRelease+"="+release)
	list, err := b.api.ConfigList(ctx, client.ConfigListOptions{Filters: f})
	if err != nil {
		return nil, fmt.Errorf("list release records of %s: %w", release, err)
	}
	sortRecords(list.Items)
	return list.Items, nil
}

func sortRecords(list []swarm.Config) {
	slices.SortFunc(list, func(a, b swarm.Config) int {
		return cmp.Compare(revisionOf(b), revisionOf(a))
	})
}

func revisionOf(c swarm.Config) int {
	n, _ := strconv.Atoi(c.Spec.Labels[LabelRevision])
	return n
}

func encodeRecord(r charts.Release) ([]byte, error) {
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	if err := json.NewEncoder(zw).Encode(r); err != nil {
		return nil, fmt.Errorf("encode record: %w", err)
	}
	if err := zw.Close(); err != nil {
		return nil, fmt.Errorf("compress record: %w", err)
	}
	return buf.Bytes(), nil
}

func decodeRecord(c swarm.Config) (charts.Release, error) {
	var r charts.Release
	if err := checkFormat(c); err != nil {
		return r, err
	}
	zr, err := gzip.NewReader(bytes.NewReader(c.Spec.Data))
	if err != nil {
		return r, fmt.Errorf("read record %s: %w", c.Spec.Name, err)
	}
	data, err := io.ReadAll(io.LimitReader(zr, 64<<20))
	if err != nil {
		return r, fmt.Errorf("read record %s: %w", c.Spec.Name, err)
	}
	if err := json.Unmarshal(data, &r); err != nil {
		return r, fmt.Errorf("read record %s: %w", c.Spec.Name, err)
	}
	r.Version = c.Version.Index
	return r, nil
}

// IsLatestRelease reports whether r is still the newest record of its
// release; see AreLatestReleases.
func (b *Backend) IsLatestRelease(ctx context.Context, r charts.Release) (bool, error) {
	current, err := b.AreLatestReleases(ctx, []charts.Release{r})
	if err != nil {
		return false, err
	}
	return current[r.Name], nil
}

// AreLatestReleases reports, by release name, whether each kept record is
// still the newest of its release: the config of its revision exists with
// the version it was read at, and none of a later revision is listed. One
// listing filtered by the names of revisions r and r+1 of every record
// answers that and carries at most those records' data, where reading the
// histories carries all of it.
//
// A newer record always implies one numbered r+1 was written, and records
// are pruned oldest first, so while r's own config stands a record r+1
// cannot have come and gone. The name filter may match by prefix (revision
// 1 also matches 10 to 19, and one release's names may prefix another's);
// each match is judged by its release label, and any match of a later
// revision answers false, which is right either way.
func (b *Backend) AreLatestReleases(ctx context.Context, kept []charts.Release) (map[string]bool, error) {
	out := make(map[string]bool, len(kept))
	f := make(client.Filters).Add("label", LabelRecord+"="+recordKind)
	asked := 0
	for _, r := range kept {
		out[r.Name] = false
		if r.Version == 0 || r.Revision < 1 {
			continue
		}
		asked++
		f.Add("name", recordName(r.Name, r.Revision))
		f.Add("name", recordName(r.Name, r.Revision+1))
	}
	if asked == 0 {
		return out, nil
	}
	if len(kept) == 1 {
		f.Add("label", LabelRelease+"="+kept[0].Name)
	}
	list, err := b.api.ConfigList(ctx, client.ConfigListOptions{Filters: f})
	if err != nil {
		if len(kept) == 1 {
			return nil, fmt.Errorf("check newest release record of %s: %w", kept[0].Name, err)
		}
		return nil, fmt.Errorf("check newest release records of %d releases: %w", len(kept), err)
	}
	byRelease := make(map[string][]swarm.Config, len(kept))
	for _, c := range list.Items {
		rel := c.Spec.Labels[LabelRelease]
		byRelease[rel] = append(byRelease[rel], c)
	}
	for _, r := range kept {
		if r.Version == 0 || r.Revision < 1 {
			continue
		}
		out[r.Name] = isHead(r, byRelease[r.Name])
	}
	return out, nil
}

// isHead judges one kept record against the listed records of its release.
func isHead(r charts.Release, listed []swarm.Config) bool {
	same := false
	for _, c := range listed {
		switch rev := revisionOf(c); {
		case rev > r.Revision:
			return false
		case rev == r.Revision && c.Spec.Name == recordName(r.Name, r.Revision):
			same = c.Version.Index == r.Version
		}
	}
	return same
}

// ReleaseOwners maps every release with records on the swarm to the owner
// stamp of its newest record, from one config listing. Only the records'
// labels are decoded (see withListBody): the owner and the revision are
// labels, and the data, a manifest each, is most of the listing on a swarm
// of many releases.
func (b *Backend) ReleaseOwners(ctx context.Context) (map[string]string, error) {
	type head struct {
		revision int
		owner    string
	}
	heads := map[string]head{}
	add := func(rel, revision, owner string) {
		if rel == "" {
			return
		}
		rev, _ := strconv.Atoi(revision)
		if h, seen := heads[rel]; !seen || rev > h.revision {
			heads[rel] = head{revision: rev, owner: owner}
		}
	}
	type entry struct {
		Spec struct{ Labels recordOwnerLabels }
	}
	decode := func(r io.Reader) error {
		return eachListed(r, func(c entry) {
			l := c.Spec.Labels
			add(l.Release, l.Revision, l.Owner)
		})
	}
	list, err := b.api.ConfigList(withListBody(ctx, decode), client.ConfigListOptions{
		Filters: make(client.Filters).Add("label", LabelRecord+"="+recordKind),
	})
	if err != nil {
		return nil, fmt.Errorf("list release records: %w", err)
	}
	for _, c := range list.Items { // empty unless the answer reached the client undecoded
		add(c.Spec.Labels[LabelRelease], c.Spec.Labels[LabelRevision], c.Spec.Labels[LabelOwner])
	}
	out := make(map[string]string, len(heads))
	for rel, h := range heads {
		out[rel] = h.owner
	}
	return out, nil
}

// recordOwnerLabels are the labels of a record ReleaseOwners reads, decoded
// into fields rather than a map: the other labels are skipped, not stored.
// The tags must match LabelRelease, LabelRevision and LabelOwner
// (TestRecordOwnerLabels_matchTheLabelsRecordsAreWrittenWith).
// encoding/json also accepts a key that differs only in case; the daemon
// sends labels in sorted order, so an exact key, which sorts after its
// upper-case variants, is the one kept. Only a record made by hand with
// nothing but such a variant reads differently from before, and whoever
// can make one can as easily make the exact label.
type recordOwnerLabels struct {
	Release  string `json:"io.flotilla.release"`
	Revision string `json:"io.flotilla.revision"`
	Owner    string `json:"io.flotilla.owner"`
}
