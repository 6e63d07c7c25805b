package backend

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/api/types/swarm"
	"github.com/moby/moby/client"

	"github.com/flotilla-gitops/flotilla/labels"
	"github.com/flotilla-gitops/flotilla/lease"
)

// The lease config's labels are labels.Lease and those after it.
const (
	// LabelEpoch is stamped on every service, network, config, secret and
	// release record a controller with a lease writes: the epoch it held,
	// so that who wrote what, and when, can be checked afterwards.
	LabelEpoch = labels.Epoch

	leasePrefix = "flotilla-lease."
	leaseData   = "flotilla leader lease: the labels are the record\n"
)

// LeaseStore keeps a leader lease in the labels of one swarm config. Swarm
// refuses an update that carries an old version ("update out of sequence"),
// and a config's labels may change in place, so the config is a
// compare-and-swap register in the swarm's own raft store that no service
// mounts.
//
// It talks through a client of its own, not the Backend's: the Backend's
// writes wait for the lease, and the lease's must not.
type LeaseStore struct {
	api  *client.Client
	name string
	key  string
	id   string // the config's id, once seen
}

var _ lease.Store = (*LeaseStore)(nil)

// NewLeaseStore returns a store for the lease of the controllers named key
// (their --controller-id), so differently named controllers never share a
// lease. It reaches the daemon opts names (Host, Transport, APIVersion; the
// environment's when Host is empty), and opts.RequestTimeout bounds each
// request; the other options are not used.
func NewLeaseStore(opts Options, key string) (*LeaseStore, error) {
	if opts.RequestTimeout <= 0 {
		opts.RequestTimeout = DefaultRequestTimeout
	}
	api, err := countingClient(opts, newCounter())
	if err != nil {
		return nil, fmt.Errorf("lease: docker client: %w", err)
	}
	return &LeaseStore{api: api, name: leaseName(key), key: key}, nil
}

// leaseName is the config's name: the prefix and key, shortened like a
// record's name when it would not fit Swarm's rules.
func leaseName(key string) string {
	name := leasePrefix + key
	if len(name) <= maxObjectName && objectNameRE.MatchString(name) {
		return name
	}
	return strings.Replace(recordName(key, 0), recordPrefix, leasePrefix, 1)
}

// Name is the lease config's name.
func (s *LeaseStore) Name() string { return s.name }

// Get reads the record by the config's name.
func (s *LeaseStore) Get(ctx context.Context) (lease.Record, uint64, error) {
	c, err := s.api.ConfigInspect(ctx, s.name, client.ConfigInspectOptions{})
	if err != nil {
		if cerrdefs.IsNotFound(err) {
			return lease.Record{}, 0, lease.ErrNoRecord
		}
		return lease.Record{}, 0, fmt.Errorf("read lease %s: %w", s.name, err)
	}
	s.id = c.Config.ID
	rec, err := parseLease(c.Config.Spec.Labels)
	if err != nil {
		return lease.Record{}, 0, fmt.Errorf("read lease %s: %w", s.name, err)
	}
	return rec, c.Config.Version.Index, nil
}

// Create makes the config with the first record.
func (s *LeaseStore) Create(ctx context.Context, r lease.Record) (uint64, error) {
	resp, err := s.api.ConfigCreate(ctx, client.ConfigCreateOptions{Spec: s.spec(r)})
	if err != nil {
		if cerrdefs.IsConflict(err) || cerrdefs.IsAlreadyExists(err) {
			return 0, lease.ErrConflict
		}
		return 0, fmt.Errorf("create lease %s: %w", s.name, err)
	}
	s.id = resp.ID
	return s.confirm(ctx, r)
}

// Update writes r over the record at version. Swarm answers an update with
// no version, so the new one is read back, and it counts only if the labels
// read are the ones written: a version read after someone else's write must
// never become this controller's to renew from.
func (s *LeaseStore) Update(ctx context.Context, version uint64, r lease.Record) (uint64, error) {
	if s.id == "" {
		if _, _, err := s.Get(ctx); err != nil {
			return 0, err
		}
	}
	_, err := s.api.ConfigUpdate(ctx, s.id, client.ConfigUpdateOptions{Version: swarm.Version{Index: version}, Spec: s.spec(r)})
	switch {
	case isOutOfSequence(err), cerrdefs.IsNotFound(err):
		return 0, lease.ErrConflict
	case err != nil:
		return 0, fmt.Errorf("update lease %s: %w", s.name, err)
	}
	return s.confirm(ctx, r)
}

func (s *LeaseStore) confirm(ctx context.Context, r lease.Record) (uint64, error) {
	c, err := s.api.ConfigInspect(ctx, s.id, client.ConfigInspectOptions{})
	if err != nil {
		return 0, fmt.Errorf("read back lease %s: %w", s.name, err)
	}
	got, err := parseLease(c.Config.Spec.Labels)
	if err != nil || got.Holder != r.Holder || got.Epoch != r.Epoch || !got.Renewed.Equal(r.Renewed) {
		return 0, lease.ErrConflict
	}
	return c.Config.Version.Index, nil
}

func (s *LeaseStore) spec(r lease.Record) swarm.ConfigSpec {
	return swarm.ConfigSpec{
		Annotations: swarm.Annotations{
			Name: s.name,
			Labels: map[string]string{
				labels.Lease:         s.key,
				labels.LeaseHolder:   r.Holder,
				labels.LeaseEpoch:    strconv.FormatUint(r.Epoch, 10),
				labels.LeaseRenewed:  r.Renewed.UTC().Format(time.RFC3339Nano),
				labels.LeaseDuration: r.Duration.String(),
			},
		},
		Data: []byte(leaseData),
	}
}

func parseLease(l map[string]string) (lease.Record, error) {
	var r lease.Record
	var err error
	r.Holder = l[labels.LeaseHolder]
	if r.Epoch, err = strconv.ParseUint(l[labels.LeaseEpoch], 10, 64); err != nil {
		return r, fmt.Errorf("label %s: %w", labels.LeaseEpoch, err)
	}
	if r.Duration, err = time.ParseDuration(l[labels.LeaseDuration]); err != nil {
		return r, fmt.Errorf("label %s: %w", labels.LeaseDuration, err)
	}
	// The holder's clock is for people; a stamp that does not parse
	// changes nothing about expiry.
	r.Renewed, _ = time.Parse(time.RFC3339Nano, l[labels.LeaseRenewed])
	return r, nil
}
