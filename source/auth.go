package source

import (
	"bytes"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"

	"github.com/go-git/go-git/v5/plumbing/transport"
	githttp "github.com/go-git/go-git/v5/plumbing/transport/http"
	gitssh "github.com/go-git/go-git/v5/plumbing/transport/ssh"

	"github.com/flotilla-gitops/flotilla/application"
)

// Environment variables naming default credential files, used when an
// application names none. See the package documentation.
const (
	EnvUsernameFile   = "FLOTILLA_GIT_USERNAME_FILE"
	EnvPasswordFile   = "FLOTILLA_GIT_PASSWORD_FILE"
	EnvSSHKeyFile     = "FLOTILLA_GIT_SSH_KEY_FILE"
	EnvKnownHostsFile = "FLOTILLA_GIT_KNOWN_HOSTS_FILE"
	// EnvCredentialHosts lists, comma-separated, the hosts (host or
	// host:port) the default credentials are for. Unset or empty, the
	// defaults go nowhere.
	EnvCredentialHosts = "FLOTILLA_GIT_CREDENTIAL_HOSTS"
)

// defaultUser is the HTTPS user name when none is given; token-based hosts
// accept any non-empty name, and it is also the usual SSH user.
const defaultUser = "git"

// auth is what one fetch authenticates with, plus the secret values to
// scrub from any error that fetch produces.
type auth struct {
	method  transport.AuthMethod
	secrets []string
}

// loadAuth reads the credential files that fit loc's protocol. Files are read
// on every call so that rotated credentials apply to the next fetch. A
// protocol the credentials do not fit (an SSH key for an https URL) is
// anonymous.
func loadAuth(loc location, c *application.Credentials) (auth, error) {
	c = effectiveCredentials(c, loc)
	if c == nil {
		return auth{}, nil
	}
	switch loc.protocol {
	case "http", "https":
		if c.PasswordFile == "" {
			return auth{}, nil
		}
		password, err := readSecretFile("password", c.PasswordFile)
		if err != nil {
			return auth{}, err
		}
		user := defaultUser
		if c.UsernameFile != "" {
			if user, err = readSecretFile("username", c.UsernameFile); err != nil {
				return auth{}, err
			}
		}
		return auth{
			method:  &githttp.BasicAuth{Username: user, Password: password},
			secrets: []string{password},
		}, nil
	case "ssh":
		if c.SSHKeyFile == "" {
			return auth{}, nil
		}
		if c.KnownHostsFile == "" {
			return auth{}, fmt.Errorf("credentials: ssh key file %s needs a known hosts file; host keys are always verified", c.SSHKeyFile)
		}
		pem, err := readLocal(c.SSHKeyFile)
		if err != nil {
			return auth{}, fmt.Errorf("credentials: read ssh key file: %w", err)
		}
		if _, err := readLocal(c.KnownHostsFile); err != nil {
			return auth{}, fmt.Errorf("credentials: known hosts file: %w", err)
		}
		user := loc.user
		if user == "" {
			user = defaultUser
		}
		keys, err := gitssh.NewPublicKeys(user, pem, "")
		if err != nil {
			// The parser's message never contains key material, but keep
			// it out of the chain anyway: only the file name matters.
			return auth{}, fmt.Errorf("credentials: ssh key file %s: not a usable unencrypted private key", c.SSHKeyFile)
		}
		check, err := gitssh.NewKnownHostsCallback(c.KnownHostsFile)
		if err != nil {
			return auth{}, fmt.Errorf("credentials: known hosts file %s: %w", c.KnownHostsFile, err)
		}
		keys.HostKeyCallback = check
		return auth{method: keys}, nil
	}
	return auth{}, nil
}

// effectiveCredentials returns c, or the environment's defaults when c names
// no file at all, or nil when neither applies. The defaults are an
// operator's token for particular hosts: they go only to a host listed in
// FLOTILLA_GIT_CREDENTIAL_HOSTS, and only over https or ssh, so neither a
// repository URL on another host nor a plain http:// one receives them.
func effectiveCredentials(c *application.Credentials, loc location) *application.Credentials {
	if c != nil && *c != (application.Credentials{}) {
		return c
	}
	if !defaultCredentialsFor(loc, os.Getenv(EnvCredentialHosts)) {
		return nil
	}
	env := application.Credentials{
		UsernameFile:   os.Getenv(EnvUsernameFile),
		PasswordFile:   os.Getenv(EnvPasswordFile),
		SSHKeyFile:     os.Getenv(EnvSSHKeyFile),
		KnownHostsFile: os.Getenv(EnvKnownHostsFile),
	}
	if env == (application.Credentials{}) {
		return nil
	}
	return &env
}

// defaultCredentialsFor reports whether loc may receive the default
// credentials given the comma-separated host list hosts. An entry without a
// port matches the protocol's default port only, so "git.example.com" does
// not also cover a second server on git.example.com:8443.
func defaultCredentialsFor(loc location, hosts string) bool {
	if loc.protocol != "https" && loc.protocol != "ssh" {
		return false
	}
	// A URL without a host (https://#…) names no server; an entry that
	// trims to nothing ("[") must not match it.
	target := strings.Trim(loc.hostname, "[]")
	if target == "" {
		return false
	}
	for entry := range strings.SplitSeq(hosts, ",") {
		entry = strings.ToLower(strings.TrimSpace(entry))
		if entry == "" {
			continue
		}
		host, port := entry, defaultPort(loc.protocol)
		if h, p, err := net.SplitHostPort(entry); err == nil {
			n, err := strconv.Atoi(p)
			if err != nil {
				continue
			}
			host, port = h, n
		} else {
			// A bare IPv6 address may come bracketed.
			host = strings.TrimSuffix(strings.TrimPrefix(entry, "["), "]")
		}
		if host != "" && host == target && port == loc.port {
			return true
		}
	}
	return false
}

// DefaultCredentialsUnscoped reports, for a warning at start, whether
// default credential files are set while no host is listed to receive
// them, so that they go nowhere.
func DefaultCredentialsUnscoped() bool {
	set := false
	for _, v := range []string{EnvUsernameFile, EnvPasswordFile, EnvSSHKeyFile, EnvKnownHostsFile} {
		set = set || os.Getenv(v) != ""
	}
	return set && strings.Trim(os.Getenv(EnvCredentialHosts), ", ") == ""
}

// readSecretFile reads a one-value file, dropping the trailing newline
// editors and `echo` add. The value never appears in the error.
func readSecretFile(what, name string) (string, error) {
	b, err := readLocal(name)
	if err != nil {
		return "", fmt.Errorf("credentials: read %s file: %w", what, err)
	}
	b = bytes.TrimRight(b, "\r\n")
	if len(b) == 0 {
		return "", fmt.Errorf("credentials: %s file %s is empty", what, name)
	}
	return string(b), nil
}

// maxCredentialFile bounds a credential file; keys and known_hosts files are
// a few KiB.
const maxCredentialFile = 1 << 20

// readLocal reads a regular file of at most maxCredentialFile bytes. Anything
// else is refused before it is opened: opening a named pipe waits for a
// writer, and a device may never end, either of which would hold the
// repository's lock with no deadline to end it.
func readLocal(name string) ([]byte, error) {
	info, err := os.Stat(name)
	if err != nil {
		return nil, err
	}
	if !info.Mode().IsRegular() {
		return nil, fmt.Errorf("%s is not a regular file", name)
	}
	if info.Size() > maxCredentialFile {
		return nil, fmt.Errorf("%s is larger than %d bytes", name, maxCredentialFile)
	}
	return os.ReadFile(name)
}
