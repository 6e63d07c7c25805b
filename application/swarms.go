package application

import (
	"net"
	"net/url"
	"path"
	"slices"
	"strconv"
	"strings"
)

// swarms checks the file's swarms and returns the destinations an
// application may name, LocalDestination included.
func (c *checker) swarms(ss []Swarm) map[string]bool {
	dest := map[string]bool{LocalDestination: true}
	seen := map[string]int{}
	for i := range ss {
		s := &ss[i]
		p := "swarms[" + strconv.Itoa(i) + "]"
		c.dnsName("", p+".name", s.Name)
		switch j, dup := seen[s.Name]; {
		case s.Name == LocalDestination:
			c.report("", p+".name", ErrInvalid, "%q is the controller's own Docker environment; give this swarm another name", s.Name)
		case dup:
			c.report("", p+".name", ErrDuplicate, "swarm %q is already defined by swarms[%d]", s.Name, j)
		case s.Name != "":
			seen[s.Name] = i
			dest[s.Name] = true
		}
		if len(s.Hosts) == 0 {
			c.report("", p+".hosts", ErrRequired, "required: at least one manager, such as tcp://10.0.0.1:2376, ssh://user@host or unix:///var/run/docker.sock")
		}
		tcp := false
		hosts := map[string]int{}
		for j, h := range s.Hosts {
			field := p + ".hosts[" + strconv.Itoa(j) + "]"
			scheme := c.dockerHost(field, h)
			tcp = tcp || scheme == "tcp"
			if k, dup := hosts[h]; dup && scheme != "" {
				c.report("", field, ErrDuplicate, "host is already listed as hosts[%d]", k)
			}
			hosts[h] = j
		}
		if s.TLS != nil {
			c.swarmTLS(p+".tls", s.TLS, tcp || len(s.Hosts) == 0)
		}
	}
	return dest
}

// dockerHost checks one Docker endpoint and returns its scheme, or "" when
// it was refused. Messages never quote the host: an ssh URL may carry a
// password.
func (c *checker) dockerHost(field, h string) string {
	u, err := url.Parse(h)
	if err != nil || u.Scheme == "" || strings.IndexFunc(h, func(r rune) bool { return r <= ' ' || r == 0x7f }) >= 0 {
		c.report("", field, ErrInvalid, "not a Docker host URL; use unix:///path, tcp://host:port or ssh://[user@]host")
		return ""
	}
	switch u.Scheme {
	case "unix":
		if u.Host != "" || !path.IsAbs(u.Path) {
			c.report("", field, ErrInvalid, "a unix host must be unix:///absolute/path")
			return ""
		}
	case "tcp":
		host, port, err := net.SplitHostPort(u.Host)
		if err != nil || host == "" || port == "" || (u.Path != "" && u.Path != "/") {
			c.report("", field, ErrInvalid, "a tcp host must be tcp://host:port, with no path")
			return ""
		}
	case "ssh":
		if _, hasPass := u.User.Password(); hasPass {
			c.report("", field, ErrInvalid, "the URL contains a password; use an ssh key (the controller's ssh client configuration)")
			return ""
		}
		if u.Hostname() == "" {
			c.report("", field, ErrInvalid, "an ssh host must be ssh://[user@]host[:port][/path of the remote docker socket]")
			return ""
		}
	default:
		c.report("", field, ErrInvalid, "unsupported scheme %q; use unix, tcp or ssh", u.Scheme)
		return ""
	}
	return u.Scheme
}

// swarmTLS checks the TLS files: absolute paths, a CA, and a client
// certificate with its key or neither.
func (c *checker) swarmTLS(p string, t *TLS, tcp bool) {
	if !tcp {
		c.report("", p, ErrInvalid, "tls secures tcp:// hosts only, and this swarm lists none")
	}
	if t.CAFile == "" {
		c.report("", p+".caFile", ErrRequired, "required: the CA certificate that signed the daemons' certificates")
	}
	for _, f := range []struct{ name, v string }{{"caFile", t.CAFile}, {"certFile", t.CertFile}, {"keyFile", t.KeyFile}} {
		if f.v != "" && (!path.IsAbs(f.v) || strings.HasSuffix(f.v, "/")) {
			c.report("", p+"."+f.name, ErrInvalid, "%q must be the absolute path of a file on the controller's host", f.v)
		}
	}
	switch {
	case t.CertFile != "" && t.KeyFile == "":
		c.report("", p+".keyFile", ErrRequired, "required with certFile")
	case t.KeyFile != "" && t.CertFile == "":
		c.report("", p+".certFile", ErrRequired, "required with keyFile")
	}
}

// destination checks that an application names a destination the file
// defines.
func (c *checker) destination(a *Application, p string, dest map[string]bool) {
	if dest[a.Destination] || a.Destination == "" {
		return
	}
	known := make([]string, 0, len(dest))
	for d := range dest {
		known = append(known, d)
	}
	slices.Sort(known)
	c.report(a.Name, p+".destination", ErrInvalid, "unknown destination %q; this file defines %s", a.Destination, strings.Join(known, ", "))
}
