package source

import (
	"bytes"
	"fmt"
	"os"

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
	c = effectiveCredentials(c)
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
// no file at all, or nil when neither names any.
func effectiveCredentials(c *application.Credentials) *application.Credentials {
	if c != nil && *c != (application.Credentials{}) {
		return c
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
