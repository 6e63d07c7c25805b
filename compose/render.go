package compose

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"github.com/distribution/reference"
	"github.com/docker/cli/cli/compose/loader"
	"github.com/docker/cli/cli/compose/schema"
	"github.com/docker/cli/cli/compose/template"
	composetypes "github.com/docker/cli/cli/compose/types"
	"github.com/docker/cli/pkg/kvfile"

	"github.com/flotilla-gitops/flotilla/fault"
	"github.com/flotilla-gitops/flotilla/source"
)

// defaultFiles are tried in order when Dir.Files is empty, the same names
// docker compose looks for.
var defaultFiles = []string{"compose.yaml", "compose.yml", "docker-compose.yml", "docker-compose.yaml"}

// loaderRoot is the working directory the loader is given instead of the
// checkout. The loader turns relative paths (config and secret files, bind
// mount sources) into absolute ones under its working directory; under this
// made-up root they can be recognised afterwards as relative, mapped back to
// the repository, and the real checkout directory — which differs between
// hosts and commits — never enters the loaded model at all. It is deep so
// that a path climbing out of the repository with ".." still lands under it
// (up to 32 levels) and is recognised as relative rather than absolute.
var loaderRoot = loaderTop + strings.Repeat("/-", 32)

// loaderTop is the top of loaderRoot: anything under it was a relative path.
const loaderTop = "/flotilla-checkout"

// Render loads the compose project d for stack the way `docker stack deploy
// -c f1 -c f2 ...` would, and returns the manifest that a deploy converts and
// a release stores, with the plaintext of its secrets kept apart.
//
// What differs from `docker stack deploy`, and why:
//
//   - Interpolation sees only the variables of d.EnvFiles, never the
//     controller's environment, so a render means the same on every host.
//   - Every file is read through source.Contain: nothing outside the
//     checkout, by "..", absolute path or symlink, is ever opened.
//   - Configs and secrets the stack creates get a content-hashed name,
//     "<stack>_<key>-<10 hex digits of sha256>" (the key is shortened to
//     fit Swarm's 64 characters), so a change rolls out as a new object
//     and the services' references follow it. One with an
//     explicit `name:` keeps it: the author opted out of rotation, and a
//     changed file then cannot replace the object while it is in use.
//   - A relative bind mount source is refused: it would resolve inside the
//     checkout, a directory that does not exist on the swarm's nodes.
//
// Bad input gives a *fault.Error naming the file (relative to d.Root), and
// the field and line when they are known.
func Render(stack string, d Dir) (*Rendered, error) {
	return render(stack, d, renderOpts{memo: true})
}

// renderOpts are what tests vary about a render.
type renderOpts struct {
	memo bool    // read and write the render memo
	inc  incMode // reuse the pieces of the previous render (incremental.go)
	// done, when set, sees the incremental render that succeeded (nil
	// for a whole one).
	done func(*incRun)
}

func render(stack string, d Dir, opts renderOpts) (_ *Rendered, err error) {
	if err := checkStack(stack); err != nil {
		return nil, &fault.Error{Field: "stack", Err: err}
	}
	p, err := openProject(d)
	if err != nil {
		return nil, err
	}
	p.limits = d.Limits.withDefaults()
	p.api = d.APIVersion
	// SOPS: see decrypt.go.
	p.useDecrypter(d.Decrypt, d.SealKey)
	p.refFn = d.SecretRef
	// Unchanged inputs: see rendermemo.go.
	key := renderKey(stack, d, p.limits)
	if !opts.memo {
		// Leave the memo alone.
	} else if r, ok := memo.renders.lookup(key, p); ok {
		return r, nil
	}
	p.inputs = &renderInputs{}
	p.incMode = opts.inc
	defer func() { err = p.withhold(err) }()
	if err := p.readEnvFiles(d.EnvFiles); err != nil {
		return nil, err
	}
	if err := p.readComposeFiles(d.Files); err != nil {
		return nil, err
	}
	cfg, err := p.loadIncremental(key, opts.inc)
	if err != nil {
		return nil, err
	}
	if err := p.checkServices(cfg); err != nil {
		return nil, err
	}
	if err := p.checkAddresses(cfg); err != nil {
		return nil, err
	}
	out, err := p.render(stack, cfg)
	if err != nil {
		return nil, err
	}
	if err := p.refuseCheckoutPaths(out.Manifest); err != nil {
		return nil, err
	}
	if opts.memo {
		memo.renders.store(key, p, out)
	}
	memo.pieces.store(p, len(out.Manifest))
	if opts.done != nil {
		opts.done(p.inc)
	}
	return out, nil
}

// project is one Render in progress.
type project struct {
	root  string // Dir.Root as given
	dir   string // project directory relative to root, slash-separated, "." for root
	work  string // directory of the first compose file, relative to root
	env   map[string]string
	files []composeFile
	warns []string
	sops  sopsState // decryption, see decrypt.go
	// refFn resolves secrets declared by reference (secretref.go);
	// usedRefs is set once it gave a value, which keeps the render out of
	// the memo, since its result depends on more than the files.
	refFn    SecretRefFunc
	usedRefs bool
	limits   Limits
	// api is Dir.APIVersion.
	api string
	// inc is set while a render reuses pieces of an earlier one.
	inc     *incRun
	incMode incMode
	// inputs records what the render read, for the memo; nil while the
	// memo checks an earlier render's inputs.
	inputs *renderInputs
}

// composeFile is one parsed compose file.
type composeFile struct {
	rel  string // relative to the repository root, for messages
	src  []byte
	dict map[string]any
	// sums are the digests of the text of the services parsed on their
	// own (chunkparse.go), for the services the render did not change.
	sums map[string][sha256.Size]byte
}

func openProject(d Dir) (*project, error) {
	dir := d.Path
	if dir == "" {
		dir = "."
	}
	if filepath.IsAbs(dir) {
		return nil, &fault.Error{File: dir, Err: fmt.Errorf("project path must be relative: %w", source.ErrOutsideRepository)}
	}
	dir = filepath.ToSlash(filepath.Clean(dir))
	abs, err := source.Contain(d.Root, dir)
	if err != nil {
		return nil, &fault.Error{File: dir, Err: err}
	}
	if st, err := os.Stat(abs); err != nil || !st.IsDir() {
		return nil, &fault.Error{File: dir, Err: fmt.Errorf("project directory not found: %w", fs.ErrNotExist)}
	}
	// $PWD is where an operator stands when running `docker stack deploy`
	// from the stack's directory: here, the application's directory in the
	// checkout, so "${PWD}/nginx.conf" reads the file "./nginx.conf" does.
	// An env file may still set PWD itself.
	return &project{root: d.Root, dir: dir, env: map[string]string{"PWD": path.Join(loaderRoot, dir)}}, nil
}

// lookup is the only environment interpolation and env_file see.
func (p *project) lookup(key string) (string, bool) {
	v, ok := p.env[key]
	return v, ok
}

func (p *project) readEnvFiles(names []string) error {
	for _, name := range names {
		data, err := p.read(name)
		if err != nil {
			return &fault.Error{File: repoRel(p.dir, name), Field: limitField(err, "source.compose.envFiles"), Err: err}
		}
		vars := map[string]string{}
		if err := parseDotenv(data, vars); err != nil {
			fe := &fault.Error{File: repoRel(p.dir, name), Err: err}
			var le *lineError
			if errors.As(err, &le) {
				fe.Line, fe.Err = le.line, le.err
			}
			return fe
		}
		if p.wasDecrypted(repoRel(p.dir, name)) {
			p.noteInterpolation(vars)
		}
		maps.Copy(p.env, vars)
	}
	return nil
}

func (p *project) readComposeFiles(names []string) error {
	if len(names) == 0 {
		for _, name := range defaultFiles {
			if p.exists(name) {
				names = []string{name}
				break
			}
		}
		if len(names) == 0 {
			return &fault.Error{File: p.dir, Err: fmt.Errorf("no compose file (%s): %w", strings.Join(defaultFiles, ", "), fs.ErrNotExist)}
		}
	}
	// Like `docker stack deploy`, paths inside the files are relative to
	// the directory of the first one.
	p.work = path.Dir(repoRel(p.dir, names[0]))
	for _, name := range names {
		rel := repoRel(p.dir, name)
		src, err := p.read(name)
		if err != nil {
			return &fault.Error{File: rel, Field: limitField(err, "source.compose.files"), Err: err}
		}
		if fe := utf8Fault(rel, src); fe != nil {
			return fe
		}
		var dict map[string]any
		var sums map[string][sha256.Size]byte
		if p.incMode == incOff || p.wasDecrypted(rel) {
			dict, err = parseYAML(src)
		} else {
			// Decrypted text is never kept; see chunkparse.go.
			dict, sums, err = parseChunked(src, p.incMode == incOn)
		}
		if err != nil {
			return yamlFault(rel, err)
		}
		if field := nulField(dict, ""); field != "" {
			return &fault.Error{File: rel, Line: lineOf(src, field), Field: field, Err: errors.New(`holds a NUL character (a "\0" or "\x00" escape), which no command, variable or label can carry to a container`)}
		}
		// A service whose env_file is inlined below no longer is what
		// its text says.
		if services, ok := dict["services"].(map[string]any); ok {
			for name := range sums {
				if svc, ok := services[name].(map[string]any); !ok || hasKey(svc, "env_file") {
					delete(sums, name)
				}
			}
		}
		if err := p.noteEncryptedCompose(rel, dict); err != nil {
			return err
		}
		if err := p.inlineEnvFiles(rel, p.lineSource(rel, src), dict); err != nil {
			return err
		}
		p.files = append(p.files, composeFile{rel: rel, src: p.lineSource(rel, src), dict: dict, sums: sums})
	}
	return nil
}

// parseYAML is loader.ParseYAML, which can panic on shapes the schema has
// not had a chance to refuse yet.
func parseYAML(src []byte) (dict map[string]any, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("unreadable compose file: %v", r)
		}
	}()
	return loader.ParseYAML(src)
}

// inlineEnvFiles replaces every service's env_file with the variables it
// holds, written into the service's environment under its own entries.
//
// The loader would read env_file itself, relative to its working directory
// and with the controller's environment filling bare names, before anything
// could check the path. Reading the files here, contained and with the
// project's variables, and handing the loader an environment with the same
// precedence (env file first, the service's own entries over it, "$"
// escaped so the values are taken literally as env files are) gives the
// result `docker stack deploy` would, without either leak.
func (p *project) inlineEnvFiles(file string, src []byte, dict map[string]any) error {
	services, _ := dict["services"].(map[string]any)
	for _, svcName := range sortedKeys(services) {
		name := svcName
		svc, ok := services[name].(map[string]any)
		if !ok {
			continue
		}
		raw, ok := svc["env_file"]
		if !ok {
			continue
		}
		field := "services." + name + ".env_file"
		fail := func(err error) error {
			return &fault.Error{File: file, Line: lineOf(src, field), Field: field, Err: err}
		}
		paths, err := stringOrList(raw)
		if err != nil {
			return fail(err)
		}
		vars := map[string]any{}
		for _, rawPath := range paths {
			name, err := template.Substitute(rawPath, p.lookup)
			if err != nil {
				return fail(err)
			}
			name = p.inCheckout(name)
			data, err := p.readAt(p.work, name)
			if err != nil {
				return fail(err)
			}
			lines, err := kvfile.ParseFromReader(bytes.NewReader(data), p.lookup)
			if err != nil {
				return fail(fmt.Errorf("env file %s: %w", repoRel(p.work, name), p.withheldFor(repoRel(p.work, name), err)))
			}
			decrypted := p.wasDecrypted(repoRel(p.work, name))
			for _, l := range lines {
				k, v, _ := strings.Cut(l, "=")
				vars[k] = strings.ReplaceAll(v, "$", "$$")
				if decrypted {
					p.noteEnvFile(svcName, k, v)
				}
			}
		}
		own, ok := environmentMap(svc["environment"])
		if !ok {
			// Malformed: leave it for the schema to name precisely.
			delete(svc, "env_file")
			continue
		}
		for k, v := range own {
			vars[k] = v
		}
		svc["environment"] = vars
		delete(svc, "env_file")
	}
	return nil
}

// stringOrList reads a compose string_or_list value.
func stringOrList(v any) ([]string, error) {
	switch v := v.(type) {
	case string:
		return []string{v}, nil
	case []any:
		out := make([]string, 0, len(v))
		for _, e := range v {
			s, ok := e.(string)
			if !ok {
				return nil, fmt.Errorf("must be a string or a list of strings")
			}
			out = append(out, s)
		}
		return out, nil
	}
	return nil, fmt.Errorf("must be a string or a list of strings")
}

// environmentMap reads a service's environment in either of its forms as
// the loader would, a bare name mapping to nil. ok is false for a shape the
// schema will refuse.
func environmentMap(v any) (map[string]any, bool) {
	out := map[string]any{}
	switch v := v.(type) {
	case nil:
	case map[string]any:
		for k, e := range v {
			out[k] = e
		}
	case []any:
		for _, e := range v {
			s, ok := e.(string)
			if !ok {
				return nil, false
			}
			if k, val, has := strings.Cut(s, "="); has {
				out[k] = val
			} else {
				out[k] = nil
			}
		}
	default:
		return nil, false
	}
	return out, true
}

// load runs the loader over every compose file, merging them in order.
func (p *project) load() (*composetypes.Config, error) {
	// The loader refuses files of different versions; say which one.
	first := schema.Version(p.files[0].dict)
	for _, f := range p.files[1:] {
		if v := schema.Version(f.dict); v != first {
			return nil, &fault.Error{File: f.rel, Line: lineOf(f.src, "version"), Field: "version", Err: fmt.Errorf(
				"version %s differs from %s in %s: merged files must declare the same version (none means %s)",
				v, first, p.files[0].rel, schema.Version(nil))}
		}
	}
	details := p.details(p.files)
	cfg, err := load(details, loadOptions{})
	if err == nil {
		return cfg, nil
	}
	// Find the file at fault: every file is validated on its own before the
	// merge, so loading each alone names the first bad one. If each loads
	// alone, the merge itself failed, which the last file caused.
	if len(p.files) > 1 {
		for _, f := range p.files {
			if _, ferr := load(p.details([]composeFile{f}), loadOptions{}); ferr != nil {
				return nil, loadFault(f, ferr)
			}
		}
	}
	last := p.files[len(p.files)-1]
	return nil, loadFault(last, err)
}

func (p *project) details(files []composeFile) composetypes.ConfigDetails {
	cf := make([]composetypes.ConfigFile, 0, len(files))
	for _, f := range files {
		cf = append(cf, composetypes.ConfigFile{Filename: f.rel, Config: f.dict})
	}
	return composetypes.ConfigDetails{
		WorkingDir:  path.Join(loaderRoot, p.work),
		ConfigFiles: cf,
		Environment: p.env,
	}
}

// load is loader.Load made safe to call on any input: the loader's
// transforms assume what schema validation should have guaranteed, and a
// panic in a controller would take every application down with one file.
func load(details composetypes.ConfigDetails, opts loadOptions) (cfg *composetypes.Config, err error) {
	defer func() {
		if r := recover(); r != nil {
			cfg, err = nil, fmt.Errorf("compose file could not be loaded: %v", r)
		}
	}()
	return loader.Load(details, func(o *loader.Options) {
		o.SkipInterpolation = opts.skipInterpolation
		o.SkipValidation = opts.skipValidation
	})
}

// loadOptions are the loader options a manifest load turns off: its text
// is already interpolated (a "$" in it is literal), and validation can be
// skipped for text that passed it before.
type loadOptions struct {
	skipInterpolation bool
	skipValidation    bool
}

// origin is the compose file that last set the dotted field: with several
// files merged, the one whose value won.
func (p *project) origin(field string) composeFile {
	parts := strings.Split(field, ".")
	for i := len(p.files) - 1; i >= 0; i-- {
		var node any = p.files[i].dict
		found := true
		for _, part := range parts {
			m, ok := node.(map[string]any)
			if !ok {
				found = false
				break
			}
			if node, ok = m[part]; !ok {
				found = false
				break
			}
		}
		if found {
			return p.files[i]
		}
	}
	return p.files[len(p.files)-1]
}

// fault is a problem with a field of the merged model, reported against
// the file that set it.
func (p *project) fault(field string, err error) *fault.Error {
	f := p.origin(field)
	return &fault.Error{File: f.rel, Line: lineOf(f.src, field), Field: field, Err: err}
}

// checkServices refuses what `docker stack deploy` refuses before
// converting (an image that is not a reference) and what only a GitOps
// deploy must (a bind mount of a path inside the checkout).
func (p *project) checkServices(cfg *composetypes.Config) error {
	// One file's services come out of the loader in map order; sort them
	// so the same bad project always reports the same problem first.
	slices.SortFunc(cfg.Services, func(a, b composetypes.ServiceConfig) int { return strings.Compare(a.Name, b.Name) })
	// Every service with a bind mount that cannot work is named at once:
	// stack files written for `docker stack deploy` from their own
	// directory often have several, and fixing them one commit at a time
	// is a poor way to learn that.
	var binds []error
	for _, svc := range cfg.Services {
		if p.inc.reused(svc.Name) {
			// Checked, as loaded the same, by the render that stored it.
			continue
		}
		field := "services." + svc.Name
		if svc.Image == "" {
			return p.fault(field, errors.New("no image specified"))
		}
		if _, err := reference.ParseAnyReference(svc.Image); err != nil {
			return p.fault(field+".image", fmt.Errorf("invalid image reference %q: %w", svc.Image, err))
		}
		for _, v := range svc.Volumes {
			if v.Type != "bind" || !within(loaderTop, v.Source) {
				continue
			}
			if src := p.userPath(v.Source); src == "./~" || strings.HasPrefix(src, "./~/") {
				binds = append(binds, p.fault(field+".volumes", fmt.Errorf(
					"bind mount of %q at %s: \"~\" is the home directory of whoever runs docker stack deploy, and a controller deploying for the swarm's nodes has none to offer; use an absolute host path or a named volume: %w",
					strings.TrimPrefix(src, "./"), v.Target, ErrUnsupported)))
				continue
			}
			binds = append(binds, p.fault(field+".volumes", fmt.Errorf(
				"bind mount of relative path %q at %s: it would resolve inside the repository checkout, which does not exist on swarm nodes; use an absolute host path or a named volume: %w",
				p.userPath(v.Source), v.Target, ErrUnsupported)))
		}
	}
	switch len(binds) {
	case 0:
	case 1:
		return binds[0]
	default:
		return errors.Join(binds...)
	}
	for _, name := range loader.GetUnsupportedProperties(p.dicts()...) {
		p.warns = append(p.warns, "ignoring unsupported service option "+name)
	}
	dep := loader.GetDeprecatedProperties(p.dicts()...)
	for _, name := range sortedKeys(dep) {
		p.warns = append(p.warns, "ignoring deprecated service option "+name+": "+dep[name])
	}
	return nil
}

func (p *project) dicts() []map[string]any {
	out := make([]map[string]any, 0, len(p.files))
	for _, f := range p.files {
		out = append(out, f.dict)
	}
	return out
}

// render names and reads every config and secret the stack creates and
// writes the manifest.
func (p *project) render(stack string, cfg *composetypes.Config) (*Rendered, error) {
	m := &manifestOut{
		Kind:    manifestKind,
		Stack:   stack,
		Compose: cfg,
		Configs: map[string]manifestConfig{},
		Secrets: map[string]manifestSecret{},
	}
	out := &Rendered{Secrets: map[string][]byte{}}

	for _, key := range sortedKeys(cfg.Configs) {
		obj := composetypes.FileObjectConfig(cfg.Configs[key])
		data, name, ref, err := p.refObject(stack, "configs", key, &obj, out)
		if err != nil {
			return nil, err
		}
		sealed := false
		if ref == nil {
			if data, name, sealed, err = p.fileObject(stack, "configs", key, &obj); err != nil {
				return nil, err
			}
		}
		if data != nil {
			if _, dup := m.Configs[name]; dup {
				return nil, p.fault("configs."+key+".name", fmt.Errorf("config name %q is used twice", name))
			}
			switch {
			case ref != nil:
				r := out.Refs[slices.IndexFunc(out.Refs, func(r ResolvedRef) bool { return r.Kind == RefConfig && r.Secret == key })]
				m.Configs[name] = manifestConfig{Key: key, From: ref.String(), Sealed: p.sealRef(out, "config", name, r, string(data))}
			case sealed:
				m.Configs[name] = manifestConfig{Key: key, Sealed: p.seal(out, "config", name, string(data))}
			case IsSealed(string(data)):
				return nil, p.fault("configs."+key+".file", errPlaceholder)
			default:
				m.Configs[name] = newManifestConfig(key, data)
			}
		}
		cfg.Configs[key] = composetypes.ConfigObjConfig(obj)
	}
	for _, key := range sortedKeys(cfg.Secrets) {
		obj := composetypes.FileObjectConfig(cfg.Secrets[key])
		data, name, ref, err := p.refObject(stack, "secrets", key, &obj, out)
		if err != nil {
			return nil, err
		}
		sealed := ref != nil
		if ref == nil {
			data, name, sealed, err = p.fileObject(stack, "secrets", key, &obj)
			if err != nil {
				return nil, err
			}
		}
		if data != nil {
			if _, dup := m.Secrets[name]; dup {
				return nil, p.fault("secrets."+key+".name", fmt.Errorf("secret name %q is used twice", name))
			}
			if ref != nil {
				m.Secrets[name] = manifestSecret{Key: key, From: ref.String(), StoreTag: digest([]byte("secret\x00" + refTag(out, RefSecret, key)))}
			} else if sealed {
				m.Secrets[name] = manifestSecret{Key: key, HMAC: p.keyedDigest("secret", string(data))}
			} else {
				m.Secrets[name] = manifestSecret{Key: key, SHA256: digest(data)}
			}
			out.Secrets[name] = data
		}
		cfg.Secrets[key] = composetypes.SecretConfig(obj)
	}

	if err := p.checkNames(stack, cfg); err != nil {
		return nil, err
	}
	if err := p.sealEnv(cfg, out); err != nil {
		return nil, err
	}
	// After sealEnv, which refuses a placeholder it did not write.
	if err := p.envRefs(cfg, out); err != nil {
		return nil, err
	}
	ord, err := p.readOrdering(cfg)
	if err != nil {
		return nil, err
	}
	if err := p.checkColours(stack, cfg, ord); err != nil {
		return nil, err
	}
	stripExtras(cfg)
	cfg.Version = manifestVersion(cfg.Version)
	keepOrdering(cfg, ord)
	text, err := p.encode(m)
	if err != nil {
		return nil, err
	}
	if err := p.checkUnsealed(text); err != nil {
		return nil, err
	}
	if err := p.checkManifestSize(text); err != nil {
		return nil, err
	}
	// Convert once now: what the loader accepts and convert refuses (an
	// undeclared network or config, a bad restart policy) is bad input too,
	// and is better reported against its file here than at deploy time.
	// It also leaves the manifest in the validated set for the deploy.
	var st *Stack
	if p.inc != nil {
		if t, ok := p.inc.template(context.Background(), stack); ok {
			memo.conversions.put(text, t)
			memo.validated.add(manifestSum(text))
			// Read only, for the warnings: no copy needed.
			st = t.stack
		}
	}
	if st == nil {
		// The compose section is the loader's own encoding of files that
		// passed the schema a moment ago, so the conversion does not
		// validate it a second time (1.5 of 10 ms of a first render of 20
		// services in a new process, BenchmarkFirstRender20). The corpus
		// and FuzzRender check every manifest a render returns against
		// the schema (manifestschema_test.go).
		memo.validated.add(manifestSum(text))
		if st, err = Convert(context.Background(), text, stack, nil); err != nil {
			return nil, p.convertFault(err)
		}
	}
	out.Manifest = text
	out.Warnings = append(p.warns, st.UnsupportedFields(p.api)...)
	return out, nil
}

// serviceErrRE finds the service convert.Services names in its errors.
var serviceErrRE = regexp.MustCompile(`convert services: service (\S+?): (.*)$`)

// convertFault reports a conversion error against the service and the
// file that defined it, when the message names one.
func (p *project) convertFault(err error) error {
	if m := serviceErrRE.FindStringSubmatch(err.Error()); m != nil {
		return p.fault("services."+m[1], errors.New(m[2]))
	}
	f := p.files[len(p.files)-1]
	return &fault.Error{File: f.rel, Err: err}
}

// fileObject reads the content of one config or secret the stack creates
// and gives it its swarm name, rewriting obj from "file: path" to
// "name: hashed". External and driver-backed objects have no content here
// and are left as they are (data nil). sealed is true when the file was
// decrypted: its name then carries a keyed digest, not a plain one.
func (p *project) fileObject(stack, kind, key string, obj *composetypes.FileObjectConfig) (data []byte, name string, sealed bool, err error) {
	if obj.External.External || obj.Driver != "" {
		return nil, "", false, nil
	}
	field := kind + "." + key + ".file"
	if obj.File == "" || obj.File == path.Join(loaderRoot, p.work) {
		return nil, "", false, p.fault(kind+"."+key, errors.New("no file: set file: to a path in the repository, or external: true"))
	}
	if !within(loaderRoot, obj.File) {
		return nil, "", false, p.fault(field, fmt.Errorf("%q: %w", p.userPath(obj.File), source.ErrOutsideRepository))
	}
	// loaderRoot stands for the repository root.
	rel, err := filepath.Rel(loaderRoot, obj.File)
	if err != nil {
		return nil, "", false, p.fault(field, err)
	}
	if data, err = p.readAt(".", rel); err != nil {
		return nil, "", false, p.fault(field, err)
	}
	sealed = p.wasDecrypted(repoRel(".", rel))
	p.warnDecryptedConfig(kind, key, repoRel(".", rel))
	name = obj.Name
	if name == "" {
		sum := digest(data)[:hashLen]
		if sealed {
			sum = p.keyedDigest("name", string(data))[:hashLen]
		}
		if name, err = nameWithSum(stack, key, sum); err != nil {
			return nil, "", false, p.fault(kind+"."+key, err)
		}
	}
	obj.File = ""
	obj.Name = name
	return data, name, sealed, nil
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
