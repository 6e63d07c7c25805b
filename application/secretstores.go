package application

import (
	"net"
	"net/url"
	"path"
	"slices"
	"strconv"
	"strings"
	"time"
)

// SecretStore is a secret store the applications file declares: where it
// is, how the controller logs in to it, how often it looks for rotated
// values, and which applications may read which paths of it. Only the
// applications file declares stores and grants; a repository names an entry
// by reference (x-flotilla.secretRef in compose), and a reference a grant
// does not cover fails before anything is read.
type SecretStore struct {
	// Name is how references name the store. Required, a DNS label,
	// unique in a file.
	Name string `yaml:"name"`
	// Vault is a HashiCorp Vault or OpenBao server's KV secrets engine.
	// Exactly one kind of store is set.
	Vault *VaultStore `yaml:"vault,omitempty"`
	// OnePassword is a 1Password Connect server.
	OnePassword *OnePasswordStore `yaml:"onePassword,omitempty"`
	// AWS is AWS Secrets Manager in one region (see AWSStore).
	AWS *AWSStore `yaml:"aws,omitempty"`
	// PollInterval is the shortest time between two reads of one entry: a
	// pass within it reuses the last answer, a pass after it reads again
	// (KV v2: the version metadata first, the value only when the version
	// moved). Default DefaultPollInterval.
	PollInterval Duration `yaml:"pollInterval,omitempty"`
	// Grants say which applications may read which paths. Required: a
	// store nobody may read is a mistake.
	Grants []SecretGrant `yaml:"grants"`
}

// DefaultPollInterval is a store's PollInterval when the file sets none.
const DefaultPollInterval = time.Minute

// VaultStore is a Vault (or OpenBao) KV mount and the login to it.
type VaultStore struct {
	// Address is the server's URL, such as https://vault.internal:8200.
	// Required; http is accepted for a loopback address only.
	Address string `yaml:"address"`
	// Namespace is the Vault Enterprise namespace. Default: none.
	Namespace string `yaml:"namespace,omitempty"`
	// Mount is the KV secrets engine's mount path, such as "kv" or
	// "secret". Required: references must name paths under it.
	Mount string `yaml:"mount"`
	// KVVersion is 1 or 2. Default 2. With 2, references name the data
	// path ("kv/data/shop/db") and the version metadata is read to notice
	// a rotation.
	KVVersion int `yaml:"kvVersion,omitempty"`
	// CACertFile is a PEM bundle the server's certificate must chain to.
	// Default: the host's roots.
	CACertFile string `yaml:"caCertFile,omitempty"`
	// Auth is how the controller logs in. Exactly one of its fields.
	Auth VaultAuth `yaml:"auth"`
}

// OnePasswordStore is a 1Password Connect server and the access token the
// controller presents to it. References name "<vault>/<item>" (titles or
// IDs) and a field label as the key.
type OnePasswordStore struct {
	// ConnectHost is the Connect server's URL, such as
	// https://connect.internal:8443. Required; http is accepted for a
	// loopback address only.
	ConnectHost string `yaml:"connectHost"`
	// TokenFile holds the Connect access token. Required; read before
	// every request, so a rotated token is picked up without a restart.
	TokenFile string `yaml:"tokenFile"`
}

// VaultAuth is one way to log in to Vault; every credential is a file on
// the controller's host (for AWS, the host's AWS identity), read when a
// login is needed, so a rotated credential is picked up without a restart.
type VaultAuth struct {
	// TokenFile holds a Vault token.
	TokenFile string `yaml:"tokenFile,omitempty"`
	// AppRole logs in with a role id and a secret id.
	AppRole *VaultAppRole `yaml:"appRole,omitempty"`
	// JWT logs in with a JWT (such as a workload identity token).
	JWT *VaultJWT `yaml:"jwt,omitempty"`
	// AWS logs in with the controller's AWS identity (Vault's aws auth
	// method, IAM type).
	AWS *VaultAWS `yaml:"aws,omitempty"`
}

// VaultAppRole is an AppRole login.
type VaultAppRole struct {
	// Mount is the auth method's mount. Default "approle".
	Mount string `yaml:"mount,omitempty"`
	// RoleIDFile and SecretIDFile hold the role id and the secret id.
	// Required.
	RoleIDFile   string `yaml:"roleIDFile"`
	SecretIDFile string `yaml:"secretIDFile"`
}

// VaultJWT is a JWT/OIDC auth method login.
type VaultJWT struct {
	// Mount is the auth method's mount. Default "jwt".
	Mount string `yaml:"mount,omitempty"`
	// Role is the Vault role to log in as. Required.
	Role string `yaml:"role"`
	// JWTFile holds the token. Required.
	JWTFile string `yaml:"jwtFile"`
}

// VaultAWS is a login with Vault's aws auth method, IAM type: the
// controller signs an STS GetCallerIdentity request with the credentials
// the AWS SDK's default chain finds on its host (environment, web identity
// token file, shared files, ECS or EC2 role) and Vault sends it to STS to
// learn who signed it. No AWS secret is sent to Vault, only that signature.
type VaultAWS struct {
	// Mount is the auth method's mount. Default "aws".
	Mount string `yaml:"mount,omitempty"`
	// Role is the Vault role to log in as. Required.
	Role string `yaml:"role"`
	// Region is the STS region the request is signed for; Vault's
	// sts_endpoint and sts_region must name the same. Default: the global
	// endpoint sts.amazonaws.com (us-east-1), Vault's default.
	Region string `yaml:"region,omitempty"`
	// HeaderValue is sent, signed, as X-Vault-AWS-IAM-Server-ID; Vault
	// requires it when its iam_server_id_header_value is set, so a
	// request signed for one Vault cannot log in to another. Optional.
	HeaderValue string `yaml:"headerValue,omitempty"`
}

// SecretGrant lets some applications read some paths of a store.
type SecretGrant struct {
	// Projects are names of the file's projects whose members are
	// granted.
	Projects []string `yaml:"projects,omitempty"`
	// Applications are names or path.Match globs of granted
	// applications. A grant needs projects or applications.
	Applications []string `yaml:"applications,omitempty"`
	// Paths are path.Match globs of the entry paths granted, such as
	// "kv/data/shop/*". Required: at least one.
	Paths []string `yaml:"paths"`
}

// StoreGrant is a store as one application sees it: the store and the
// paths the file grants that application. Defaults sets them.
type StoreGrant struct {
	Store SecretStore
	Paths []string
}

// grantedStores returns the stores and paths that the application named
// app, a member of project (or "" for none), is granted.
func grantedStores(stores []SecretStore, app, project string) []StoreGrant {
	var out []StoreGrant
	for _, s := range stores {
		var paths []string
		for _, g := range s.Grants {
			if matchAny(g.Applications, app) || (project != "" && matchAny(g.Projects, project)) {
				paths = append(paths, g.Paths...)
			}
		}
		if len(paths) > 0 {
			out = append(out, StoreGrant{Store: s, Paths: paths})
		}
	}
	return out
}

// MayRead reports whether the grant covers the entry path p.
func (g *StoreGrant) MayRead(p string) bool {
	return path.Clean(p) == p && !strings.HasPrefix(p, "/") && matchAny(g.Paths, p)
}

// secretStores checks the file's stores; projects are the file's project
// names.
func (c *checker) secretStores(ss []SecretStore, projects map[string]bool) {
	seen := map[string]int{}
	for i := range ss {
		s := &ss[i]
		p := "secretStores[" + strconv.Itoa(i) + "]"
		c.dnsName("", p+".name", s.Name)
		if j, dup := seen[s.Name]; dup && s.Name != "" {
			c.report("", p+".name", ErrDuplicate, "store %q is already defined by secretStores[%d]", s.Name, j)
		} else if s.Name != "" {
			seen[s.Name] = i
		}
		if s.PollInterval.Duration < 0 {
			c.report("", p+".pollInterval", ErrInvalid, "must not be negative")
		}
		switch {
		case kinds(*s) > 1:
			c.report("", p, ErrInvalid, "set exactly one kind of store: vault, onePassword or aws")
		case s.OnePassword != nil:
			c.onePasswordStore(p+".onePassword", s.OnePassword)
		case s.AWS != nil:
			c.awsStore(p+".aws", s.AWS)
		case s.Vault == nil:
			c.report("", p+".vault", ErrRequired, "required: the store's address, mount and auth (or onePassword, or aws)")
		default:
			c.vaultStore(p+".vault", s.Vault)
		}
		if len(s.Grants) == 0 {
			c.report("", p+".grants", ErrRequired, "required: which projects or applications may read which paths")
		}
		for j, g := range s.Grants {
			gp := p + ".grants[" + strconv.Itoa(j) + "]"
			if len(g.Projects) == 0 && len(g.Applications) == 0 {
				c.report("", gp, ErrRequired, "name projects or applications")
			}
			for k, pr := range g.Projects {
				if !projects[pr] {
					c.report("", gp+".projects["+strconv.Itoa(k)+"]", ErrInvalid, "no project %q in this file", pr)
				}
			}
			c.grantPaths(gp+".paths", s, g.Paths)
		}
	}
}

// grantPaths checks the path globs a grant of store s gives, at field p.
func (c *checker) grantPaths(p string, s *SecretStore, globs []string) {
	if len(globs) == 0 {
		c.report("", p, ErrRequired, "required: globs of the entry paths granted, such as %s", pathExample(s))
	}
	for k, gl := range globs {
		f := p + "[" + strconv.Itoa(k) + "]"
		if _, err := path.Match(gl, ""); err != nil {
			c.report("", f, ErrInvalid, "%q is not a glob", gl)
		} else if s.Vault != nil && s.Vault.Mount != "" && !strings.HasPrefix(gl, strings.Trim(s.Vault.Mount, "/")+"/") {
			c.report("", f, ErrInvalid, "%q is not under the store's mount %q", gl, s.Vault.Mount)
		} else if s.OnePassword != nil && !strings.Contains(strings.Trim(gl, "/"), "/") {
			c.report("", f, ErrInvalid, "%q names no item: 1Password paths are <vault>/<item>, such as shop/*", gl)
		}
	}
}

// previewSecrets checks what a set grants its previews to decrypt and
// read (p is the set's preview field); stores are the file's, by name.
func (c *checker) previewSecrets(p string, pv *Preview, stores map[string]*SecretStore) {
	c.sops("", p, pv.SOPS)
	for i, g := range pv.SecretStores {
		gp := p + ".secretStores[" + strconv.Itoa(i) + "]"
		s, ok := stores[g.Store]
		if !ok {
			c.report("", gp+".store", ErrInvalid, "no store %q in this file's secretStores", g.Store)
			continue
		}
		c.grantPaths(gp+".paths", s, g.Paths)
	}
}

// previewGrants are the stores and paths a preview that g describes may
// read: only what its set's preview block grants.
func previewGrants(f *File, g *Generated) []StoreGrant {
	if g.Index < 0 || g.Index >= len(f.ApplicationSets) || f.ApplicationSets[g.Index].Name != g.Set {
		return nil
	}
	pv := f.ApplicationSets[g.Index].Preview
	if pv == nil {
		return nil
	}
	var out []StoreGrant
	for _, pg := range pv.SecretStores {
		for _, s := range f.SecretStores {
			if s.Name != pg.Store {
				continue
			}
			if i := slices.IndexFunc(out, func(o StoreGrant) bool { return o.Store.Name == s.Name }); i >= 0 {
				out[i].Paths = append(out[i].Paths, pg.Paths...)
			} else {
				out = append(out, StoreGrant{Store: s, Paths: slices.Clone(pg.Paths)})
			}
		}
	}
	return out
}

// pathExample is a grant glob of the store's kind, for messages.
func pathExample(s *SecretStore) string {
	if s.OnePassword != nil {
		return "<vault>/* (1Password paths are <vault>/<item>)"
	}
	if s.AWS != nil {
		return "<team>/* (globs of the secret names (or ARNs) granted)"
	}
	return mountOr(s) + "/data/<team>/*"
}

func mountOr(s *SecretStore) string {
	if s.Vault != nil && s.Vault.Mount != "" {
		return strings.Trim(s.Vault.Mount, "/")
	}
	return "<mount>"
}

func (c *checker) vaultStore(p string, v *VaultStore) {
	c.storeAddress(p+".address", v.Address)
	if strings.Trim(v.Mount, "/") == "" {
		c.report("", p+".mount", ErrRequired, "required: the KV secrets engine's mount path, such as kv")
	}
	if v.KVVersion != 1 && v.KVVersion != 2 {
		c.report("", p+".kvVersion", ErrInvalid, "must be 1 or 2")
	}
	c.absFile(p+".caCertFile", v.CACertFile, false)
	a := v.Auth
	n := 0
	if a.TokenFile != "" {
		n++
		c.absFile(p+".auth.tokenFile", a.TokenFile, true)
	}
	if a.AppRole != nil {
		n++
		c.absFile(p+".auth.appRole.roleIDFile", a.AppRole.RoleIDFile, true)
		c.absFile(p+".auth.appRole.secretIDFile", a.AppRole.SecretIDFile, true)
	}
	if a.JWT != nil {
		n++
		if a.JWT.Role == "" {
			c.report("", p+".auth.jwt.role", ErrRequired, "required: the Vault role to log in as")
		}
		c.absFile(p+".auth.jwt.jwtFile", a.JWT.JWTFile, true)
	}
	if a.AWS != nil {
		n++
		if a.AWS.Role == "" {
			c.report("", p+".auth.aws.role", ErrRequired, "required: the Vault role to log in as")
		}
		if a.AWS.Region != "" && !awsRegionRE.MatchString(a.AWS.Region) {
			c.report("", p+".auth.aws.region", ErrInvalid, "%q is not an AWS region name, such as eu-central-1", a.AWS.Region)
		}
	}
	if n != 1 {
		c.report("", p+".auth", ErrInvalid, "set exactly one of tokenFile, appRole, jwt and aws")
	}
}

func (c *checker) onePasswordStore(p string, o *OnePasswordStore) {
	c.storeAddress(p+".connectHost", o.ConnectHost)
	c.absFile(p+".tokenFile", o.TokenFile, true)
}

// storeAddress accepts https, and http on a loopback host only: a token
// must not cross a network in the clear. The address is not quoted, as it
// may carry credentials.
func (c *checker) storeAddress(field, a string) {
	if a == "" {
		c.report("", field, ErrRequired, "required: the server's URL, such as https://vault.internal:8200")
		return
	}
	u, err := urlParse(a)
	switch {
	case err != nil || u.Host == "":
		c.report("", field, ErrInvalid, "not a URL; use https://host:port")
	case u.User != nil:
		c.report("", field, ErrInvalid, "must not carry credentials; use auth")
	case u.Scheme == "https":
	case u.Scheme == "http" && isLoopback(u.Hostname()):
	default:
		c.report("", field, ErrInvalid, "use https (http is accepted for a loopback address only)")
	}
}

func (c *checker) absFile(field, f string, required bool) {
	switch {
	case f == "" && required:
		c.report("", field, ErrRequired, "required: an absolute path on the controller's host")
	case f == "":
	case !path.IsAbs(f) || path.Clean(f) != f:
		c.report("", field, ErrInvalid, "%q must be a clean absolute path on the controller's host", f)
	}
}

var urlParse = url.Parse

// isLoopback reports whether host is localhost or a loopback IP.
func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// kinds counts the kinds of store s sets: exactly one is valid.
func kinds(s SecretStore) int {
	n := 0
	for _, set := range []bool{s.Vault != nil, s.OnePassword != nil, s.AWS != nil} {
		if set {
			n++
		}
	}
	return n
}
