package compose

import (
	"context"
	"strings"
	"sync"

	"github.com/docker/cli/cli/compose/convert"
	composetypes "github.com/docker/cli/cli/compose/types"
)

// placeholderPrefix starts the id a memoised conversion gives every config
// and secret reference. A NUL cannot start an id the swarm hands out, so a
// placeholder is never mistaken for one.
const placeholderPrefix = "\x00flotilla-ref:"

func placeholderID(name string) string { return placeholderPrefix + name }

// convertTemplate is a manifest converted once, with a placeholder id in
// every place docker/cli's convert puts a config or secret id. It is never
// changed once made; instantiate copies it.
type convertTemplate struct {
	stack *Stack
	// configNames and secretNames are what a conversion with a Resolver
	// asks it for, exactly as the conversion itself would.
	configNames, secretNames []string
}

// newConvertTemplate runs the whole conversion — decode, load, convert — with
// placeholder ids.
func newConvertTemplate(ctx context.Context, manifest, stack string) (*convertTemplate, error) {
	t := &convertTemplate{}
	st, _, err := convertManifest(ctx, manifest, stack, func(ns convert.Namespace, cfg *composetypes.Config) (*refClient, error) {
		t.configNames, t.secretNames = referenceNames(ns, cfg)
		return &refClient{placeholders: true}, nil
	})
	if err != nil {
		return nil, err
	}
	t.stack = st
	return t, nil
}

// instantiate is what Convert(manifest, t's stack, r) gives: a copy of the
// template with the placeholders replaced by r's ids, or by empty ones when
// r is nil. When r does not know a name a service references, the
// conversion is run again with r's answers, so the error is the one
// convert itself gives.
func (t *convertTemplate) instantiate(ctx context.Context, manifest string, r Resolver) (*Stack, error) {
	var configs, secrets map[string]string
	if r != nil {
		var err error
		if configs, secrets, err = resolveIDs(ctx, r, t.configNames, t.secretNames); err != nil {
			return nil, err
		}
	}
	st := deepCopy(t.stack)
	if !fillIDs(st, configs, secrets, r != nil) {
		api := &refClient{configs: configs, secrets: secrets}
		st, _, err := convertManifest(ctx, manifest, t.stack.Namespace, func(convert.Namespace, *composetypes.Config) (*refClient, error) {
			return api, nil
		})
		return st, err
	}
	return st, nil
}

// fillIDs replaces every placeholder in st's services with the id of the
// name it stands for. With strict set, a name missing from the maps makes
// it return false (st is then half filled and must be dropped); otherwise
// it gets an empty id, as a conversion for declaration only gives.
func fillIDs(st *Stack, configs, secrets map[string]string, strict bool) bool {
	fill := func(id string, ids map[string]string) (string, bool) {
		name, ok := strings.CutPrefix(id, placeholderPrefix)
		if !ok {
			return id, true
		}
		real, known := ids[name]
		return real, known || !strict
	}
	for name, spec := range st.Services {
		cs := spec.TaskTemplate.ContainerSpec
		if cs == nil {
			continue
		}
		ok := true
		for _, ref := range cs.Secrets {
			if ref.SecretID, ok = fill(ref.SecretID, secrets); !ok {
				return false
			}
		}
		for _, ref := range cs.Configs {
			if ref.ConfigID, ok = fill(ref.ConfigID, configs); !ok {
				return false
			}
		}
		if cs.Privileges != nil && cs.Privileges.CredentialSpec != nil {
			c := cs.Privileges.CredentialSpec
			if c.Config, ok = fill(c.Config, configs); !ok {
				return false
			}
		}
		st.Services[name] = spec
	}
	return true
}

// convertMemo bounds itself by the manifest text it keeps (a fair measure of
// a conversion's size) and by its entries, dropping arbitrary entries to
// make room.
type convertMemo struct {
	mu         sync.Mutex
	maxBytes   int
	maxEntries int
	bytes      int
	m          map[string]*convertTemplate
}

func (c *convertMemo) get(manifest string) (*convertTemplate, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	t, ok := c.m[manifest]
	return t, ok
}

func (c *convertMemo) put(manifest string, t *convertTemplate) {
	if len(manifest) > c.maxBytes {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = map[string]*convertTemplate{}
	}
	if _, ok := c.m[manifest]; ok {
		c.m[manifest] = t
		return
	}
	for k := range c.m {
		if c.bytes+len(manifest) <= c.maxBytes && len(c.m) < c.maxEntries {
			break
		}
		delete(c.m, k)
		c.bytes -= len(k)
	}
	c.m[manifest] = t
	c.bytes += len(manifest)
}

// reset empties the memo; tests use it to compare a first conversion with a
// memoised one.
func (c *convertMemo) reset() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.m, c.bytes = nil, 0
}
