package secretstore

import "slices"

// A store can say that it rotated a value (a webhook from the store, or a
// rotation job that calls the API afterwards). Expire makes the values it
// names due for a read at once, whatever their store's pollInterval: the
// next pass that resolves one asks the store, and so does the next round
// of Watch, which starts the pass of every application whose value moved.

// Users lists, sorted, the applications whose renders used a value of the
// store named store (only the entry at path, when path is not "").
func (s *Stores) Users(store, path string) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var apps []string
	for k, e := range s.entries {
		if !matches(k, e, store, path) {
			continue
		}
		for app := range e.apps {
			if !slices.Contains(apps, app) {
				apps = append(apps, app)
			}
		}
	}
	slices.Sort(apps)
	return apps
}

// Expire makes the values Users(store, path) covers due for a read now,
// and returns how many there are.
func (s *Stores) Expire(store, path string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for k, e := range s.entries {
		if matches(k, e, store, path) {
			e.checked = e.checked.Add(-e.store.PollInterval.Duration - 1)
			n++
		}
	}
	return n
}

func matches(k entryKey, e *entry, store, path string) bool {
	return e.store.Name == store && (path == "" || k.path == path)
}
