package application

import (
	"strings"
	"testing"
)

func TestParse_swarmsAndDestinations(t *testing.T) {
	f, err := Parse("apps.yaml", []byte(`apiVersion: flotilla/v1
swarms:
  - name: eu
    hosts: [tcp://10.1.0.10:2376, tcp://10.1.0.11:2376]
    tls: {caFile: /run/secrets/eu-ca.pem, certFile: /run/secrets/eu-cert.pem, keyFile: /run/secrets/eu-key.pem}
  - name: lab
    hosts: [ssh://deploy@lab.example.com, unix:///run/lab.sock]
applications:
  - name: shop-eu
    stack: shop
    destination: eu
    source: {repoURL: https://git.example.com/shop.git}
  - name: shop-local
    stack: shop
    source: {repoURL: https://git.example.com/shop.git}
`))
	if err != nil {
		t.Fatal(err)
	}
	if got := f.Applications[1].Destination; got != LocalDestination {
		t.Errorf("an application naming no destination got %q, want %q", got, LocalDestination)
	}
	if got := f.Swarms[0].TLS.KeyFile; got != "/run/secrets/eu-key.pem" {
		t.Errorf("tls.keyFile = %q", got)
	}
	if len(f.Swarms[1].Hosts) != 2 {
		t.Errorf("hosts = %v", f.Swarms[1].Hosts)
	}
}

func TestParse_refusesUnknownDestinationDuplicateSwarmsAndBadTLSPaths(t *testing.T) {
	_, err := Parse("apps.yaml", []byte(`apiVersion: flotilla/v1
swarms:
  - name: eu
    hosts: [tcp://10.1.0.10:2376]
    tls: {caFile: certs/ca.pem, certFile: /run/secrets/cert.pem}
  - name: eu
    hosts: [ssh://deploy@lab.example.com]
  - name: local
    hosts: [tcp://nohost, ftp://x, ssh://u:pw@h, unix://rel/sock]
  - name: lab
    hosts: [ssh://h]
    tls: {caFile: /ca.pem}
applications:
  - name: shop
    destination: us
    source: {repoURL: https://git.example.com/shop.git}
`))
	checkProblems(t, err, []want{
		{line: 5, field: "swarms[0].tls.caFile", kind: ErrInvalid, msg: `"certs/ca.pem" must be the absolute path`},
		{line: 5, field: "swarms[0].tls.keyFile", kind: ErrRequired, msg: "required with certFile"},
		{line: 6, field: "swarms[1].name", kind: ErrDuplicate, msg: "already defined by swarms[0]"},
		{line: 8, field: "swarms[2].name", kind: ErrInvalid, msg: "controller's own Docker environment"},
		{line: 9, field: "swarms[2].hosts[0]", kind: ErrInvalid, msg: "tcp://host:port"},
		{line: 9, field: "swarms[2].hosts[1]", kind: ErrInvalid, msg: `unsupported scheme "ftp"`},
		{line: 9, field: "swarms[2].hosts[2]", kind: ErrInvalid, msg: "contains a password"},
		{line: 9, field: "swarms[2].hosts[3]", kind: ErrInvalid, msg: "unix:///absolute/path"},
		{line: 12, field: "swarms[3].tls", kind: ErrInvalid, msg: "tcp:// hosts only"},
		{line: 15, app: "shop", field: "applications[0].destination", kind: ErrInvalid, msg: `unknown destination "us"; this file defines eu, lab, local`},
	})
	if err != nil && strings.Contains(err.Error(), "pw") {
		t.Errorf("a password in an ssh host was echoed: %v", err)
	}
	if err != nil && !strings.Contains(err.Error(), "file apps.yaml:5: field swarms[0].tls.caFile") {
		t.Errorf("the TLS problem does not name the file and field: %v", err)
	}
}

func TestValidate_sameStackOnTwoSwarmsIsTwoApplications(t *testing.T) {
	f := &File{APIVersion: APIVersion,
		Swarms: []Swarm{{Name: "eu", Hosts: []string{"tcp://10.0.0.1:2375"}}},
		Applications: []Application{
			{Name: "a", Stack: "shop", Source: Source{RepoURL: "https://h/x.git"}},
			{Name: "b", Stack: "shop", Destination: "eu", Source: Source{RepoURL: "https://h/x.git"}},
			{Name: "c", Stack: "shop", Destination: "eu", Source: Source{RepoURL: "https://h/x.git"}},
		}}
	Defaults(f)
	checkProblems(t, Validate(f), []want{{app: "c", field: "applications[2].stack", kind: ErrDuplicate, msg: `already claimed by application "b"`}})
}
