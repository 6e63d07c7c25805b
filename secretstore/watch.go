package secretstore

import (
	"context"
	"slices"
	"time"

	"github.com/flotilla-gitops/flotilla/application"
)

// Between passes, Watch asks the stores at their own pollInterval for the
// values some application's render used, and calls changed with the
// applications whose value moved, so the reconciler runs their pass now
// rather than at their next interval. A store that fails is left to the
// pass, which reports it; Watch only notices rotations.

// watchTick is how often Watch looks for entries due for a check; an
// entry is checked no more often than its store's pollInterval.
const watchTick = time.Second

// forgetAfter drops an entry no pass has used for this long (its
// application was removed, or no longer names it).
const forgetAfter = time.Hour

// usedBy notes that app's render used the value of ref in st.
func (s *Stores) usedBy(st application.SecretStore, ref Ref, app string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if e := s.entries[entryKey{storeID(st), ref.Path, ref.Key}]; e != nil {
		e.apps[app] = s.now()
	}
}

// Watch runs until ctx ends.
func (s *Stores) Watch(ctx context.Context, changed func(app string)) {
	t := time.NewTicker(watchTick)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		for _, app := range s.poll(ctx) {
			changed(app)
		}
	}
}

// poll checks every entry due for a check and returns the applications
// whose value changed.
func (s *Stores) poll(ctx context.Context) []string {
	type due struct {
		k      entryKey
		st     application.SecretStore
		digest string
	}
	now := s.now()
	var todo []due
	s.mu.Lock()
	for k, e := range s.entries {
		last := time.Time{}
		for app, at := range e.apps {
			if now.Sub(at) > forgetAfter {
				delete(e.apps, app)
			} else if at.After(last) {
				last = at
			}
		}
		if len(e.apps) == 0 && now.Sub(e.checked) > forgetAfter {
			delete(s.entries, k)
			continue
		}
		if now.Sub(e.checked) >= e.store.PollInterval.Duration {
			todo = append(todo, due{k, e.store, e.digest})
		}
	}
	s.mu.Unlock()
	seen := map[string]bool{}
	var apps []string
	for _, d := range todo {
		_, e, err := s.get(ctx, d.st, Ref{Path: d.k.path, Key: d.k.key})
		if err != nil || e.digest == d.digest {
			continue
		}
		s.mu.Lock()
		if cur := s.entries[d.k]; cur != nil {
			for app := range cur.apps {
				if !seen[app] {
					seen[app] = true
					apps = append(apps, app)
				}
			}
		}
		s.mu.Unlock()
	}
	slices.Sort(apps)
	return apps
}
