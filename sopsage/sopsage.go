// Package sopsage decrypts files that SOPS encrypted for age recipients, in
// memory, with identities handed to it rather than found in the process
// environment.
//
// The sops library's age key source reads SOPS_AGE_KEY, SOPS_AGE_KEY_FILE,
// SOPS_AGE_KEY_CMD and the user's config directory whenever a key has no
// identities of its own. A controller decrypts for many applications at
// once, each possibly with its own key, so setting those variables would
// race and would let one application's key decrypt another's files. This
// package instead parses the identities once, passes them to each
// age.MasterKey through the library's ParsedIdentities, and answers the
// library's key-service calls itself: the environment is never read, and a
// file encrypted only for KMS, PGP or Vault is refused rather than sent to
// a cloud API the operator did not configure.
//
// Plaintext exists only in the returned slice. No error this package
// returns quotes a decrypted value; errors from the library whose text could
// (a value that does not parse, a MAC comparison) are replaced by its own.
package sopsage

import (
	"bytes"
	"crypto/subtle"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	"filippo.io/age"
	"github.com/getsops/sops/v3"
	"github.com/getsops/sops/v3/aes"
	agekey "github.com/getsops/sops/v3/age"
	"github.com/getsops/sops/v3/config"
	"github.com/getsops/sops/v3/keyservice"
	"github.com/getsops/sops/v3/stores/dotenv"
	"github.com/getsops/sops/v3/stores/ini"
	sopsjson "github.com/getsops/sops/v3/stores/json"
	sopsyaml "github.com/getsops/sops/v3/stores/yaml"
)

// Reasons a file that looks encrypted is refused, for errors.Is. Each
// *DecryptError wraps exactly one of them.
var (
	// ErrNoIdentity: the file is encrypted and no age identity was
	// configured for the application.
	ErrNoIdentity = errors.New("no age identity is configured to decrypt it")
	// ErrNoMatch: identities were configured, none is a recipient.
	ErrNoMatch = errors.New("no age identity matches the file's recipients")
	// ErrNoAgeRecipient: the file is encrypted only for key types this
	// package does not use (KMS, PGP, Vault, ...).
	ErrNoAgeRecipient = errors.New("the file has no age recipient")
	// ErrModified: the MAC or an encrypted value does not authenticate.
	ErrModified = errors.New("the file was modified after encryption")
	// ErrMalformed: the file carries sops metadata but cannot be read as
	// a sops file of its format.
	ErrMalformed = errors.New("not a readable sops file")
)

// DecryptError is a file that looks encrypted and could not be decrypted.
// Its message says why without quoting the file's content.
type DecryptError struct {
	Format Format
	// Reason is one of the sentinels above.
	Reason error
	// Detail adds safe specifics (recipients, which check failed).
	Detail string
}

func (e *DecryptError) Error() string {
	msg := "sops " + e.Format.String() + " file: "
	if e.Detail != "" {
		return msg + e.Detail + ": " + e.Reason.Error()
	}
	return msg + e.Reason.Error()
}

func (e *DecryptError) Unwrap() error { return e.Reason }

// Identities is a set of age identities. It is safe for concurrent use
// and never changes after it is made. A nil *Identities holds none: it
// passes plain files through and refuses encrypted ones.
type Identities struct {
	ids agekey.ParsedIdentities
}

// ReadIdentityFile reads an age identity file (what age-keygen writes:
// AGE-SECRET-KEY-1... lines, blank lines and # comments).
func ReadIdentityFile(path string) (*Identities, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read age identity file: %w", err)
	}
	ids, err := ParseIdentities(data)
	if err != nil {
		return nil, fmt.Errorf("age identity file %s: %w", path, err)
	}
	return ids, nil
}

// ParseIdentities parses identity-file text. It needs at least one
// identity. A bad line is reported by number only: the line may be a key.
func ParseIdentities(data []byte) (*Identities, error) {
	var ids agekey.ParsedIdentities
	n := 0
	for line := range bytes.Lines(data) {
		n++
		s := strings.TrimSpace(string(line))
		if s == "" || strings.HasPrefix(s, "#") {
			continue
		}
		parsed, err := age.ParseIdentities(strings.NewReader(s))
		if err != nil || len(parsed) == 0 {
			return nil, fmt.Errorf("line %d is not an age identity", n)
		}
		ids = append(ids, parsed...)
	}
	if len(ids) == 0 {
		return nil, errors.New("no age identity found")
	}
	return &Identities{ids: ids}, nil
}

// Len is the number of identities held.
func (k *Identities) Len() int {
	if k == nil {
		return 0
	}
	return len(k.ids)
}

// Decrypt returns the plaintext of data when it is sops output (see
// Detect), and data itself, unchanged, when it is not. file is the name
// the format is chosen by; only its extension matters.
//
// A file that looks encrypted either decrypts completely, MAC verified,
// or gives a *DecryptError; it is never returned as it came.
func (k *Identities) Decrypt(file string, data []byte) ([]byte, error) {
	f, ok := Detect(file, data)
	if !ok {
		return data, nil
	}
	return k.decrypt(f, data)
}

// store is the part of a sops store this package uses.
type store interface {
	LoadEncryptedFile(in []byte) (sops.Tree, error)
	EmitPlainFile(in sops.TreeBranches) ([]byte, error)
}

func storeFor(f Format) store {
	switch f {
	case YAML:
		return sopsyaml.NewStore(&config.YAMLStoreConfig{})
	case JSON:
		return sopsjson.NewStore(&config.JSONStoreConfig{})
	case Dotenv:
		return dotenv.NewStore(&config.DotenvStoreConfig{})
	case INI:
		return ini.NewStore(&config.INIStoreConfig{})
	}
	return sopsjson.NewBinaryStore(&config.JSONBinaryStoreConfig{})
}

func (k *Identities) decrypt(f Format, data []byte) (plain []byte, err error) {
	fail := func(reason error, format string, args ...any) error {
		return &DecryptError{Format: f, Reason: reason, Detail: fmt.Sprintf(format, args...)}
	}
	// The stores and the tree walk assume well-formed input in places
	// (a type assertion on each value); arbitrary bytes from a repository
	// must fail the file, not the controller.
	defer func() {
		if r := recover(); r != nil {
			plain, err = nil, fail(ErrMalformed, "")
		}
	}()

	if f == YAML && yamlHasAlias(data) {
		return nil, fail(ErrMalformed, "it uses YAML aliases, which sops never writes")
	}
	st := storeFor(f)
	tree, err := st.LoadEncryptedFile(data)
	if err != nil {
		// Nothing is decrypted yet: the text can only quote what the
		// repository holds as it is.
		return nil, fail(ErrMalformed, "%v", err)
	}
	recipients, others := recipientsOf(tree.Metadata)
	if len(recipients) == 0 {
		if len(others) == 0 {
			return nil, fail(ErrNoAgeRecipient, "no keys")
		}
		return nil, fail(ErrNoAgeRecipient, "encrypted only for %s", strings.Join(others, ", "))
	}
	if k.Len() == 0 {
		return nil, fail(ErrNoIdentity, "")
	}

	client := &ageClient{ids: k.ids}
	dataKey, err := tree.Metadata.GetDataKeyWithKeyServices([]keyservice.KeyServiceClient{client}, nil)
	if err != nil {
		if client.failed == nil {
			return nil, fail(ErrNoMatch, "recipients %s", strings.Join(recipients, ", "))
		}
		// A matching identity that still cannot open the data key means
		// the age stanza itself was altered.
		return nil, fail(ErrModified, "the data key does not decrypt (%v)", client.failed)
	}
	defer clear(dataKey)

	cipher := aes.NewCipher()
	mac, err := tree.Decrypt(dataKey, cipher)
	if err != nil {
		// The library's message may quote a value that is not in sops'
		// ciphertext format, which can be plaintext someone added.
		return nil, fail(ErrModified, "a value does not authenticate")
	}
	stored, err := cipher.Decrypt(tree.Metadata.MessageAuthenticationCode, dataKey, tree.Metadata.LastModified.Format(time.RFC3339))
	storedMAC, _ := stored.(string)
	if err == nil && storedMAC == "" {
		return nil, fail(ErrModified, "the MAC is missing")
	}
	// A stored MAC that does not authenticate was altered as surely as
	// one that differs.
	if err != nil || subtle.ConstantTimeCompare([]byte(storedMAC), []byte(mac)) != 1 {
		return nil, fail(ErrModified, "MAC mismatch")
	}
	out, err := st.EmitPlainFile(tree.Branches)
	if err != nil {
		return nil, fail(ErrMalformed, "the decrypted content cannot be written as %s", f)
	}
	return out, nil
}

// recipientsOf lists the age recipients of a file, and the other kinds of
// key it names, sorted and without duplicates.
func recipientsOf(m sops.Metadata) (recipients, others []string) {
	for _, g := range m.KeyGroups {
		for _, key := range g {
			if ak, ok := key.(*agekey.MasterKey); ok {
				recipients = append(recipients, ak.Recipient)
			} else {
				others = append(others, key.TypeToIdentifier())
			}
		}
	}
	slices.Sort(recipients)
	slices.Sort(others)
	return slices.Compact(recipients), slices.Compact(others)
}
