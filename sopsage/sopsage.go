// Package sopsage decrypts files that SOPS encrypted for age recipients, in
// memory, with identities handed to it rather than found in the process
// environment.
//
// It reads the sops file format itself (YAML, JSON, dotenv, INI and
// binary; the data key opened with age; each value with AES-GCM; the MAC
// checked) instead of linking the sops library, whose packages import and
// initialise every cloud key service SDK (AWS, GCP, Azure, Vault): about
// half of the controller's binary and most of its resident memory, for
// key types a default build refuses anyway.
//
// Identities are parsed once and used only for the files they are given
// for: the environment (SOPS_AGE_KEY, SOPS_AGE_KEY_FILE, the user's config
// directory) is never read, since a controller decrypts for many
// applications at once, each possibly with its own key. A file encrypted
// only for KMS, PGP or Vault is refused, naming the key types, rather than
// sent to a cloud API the operator did not configure. Built with the kms
// tag, the package also links the sops library's key service, and opens
// such files, and the few sops features its own reader leaves out, with
// it (see docs/secrets.md).
//
// Plaintext exists only in the returned slice. No error this package
// returns quotes a decrypted value.
package sopsage

import (
	"bytes"
	"crypto/subtle"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"filippo.io/age"
	"filippo.io/age/armor"
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
	// build does not open (KMS, PGP, Vault, ...; see the kms build tag).
	ErrNoAgeRecipient = errors.New("the file has no age recipient")
	// ErrModified: the MAC or an encrypted value does not authenticate.
	ErrModified = errors.New("the file was modified after encryption")
	// ErrMalformed: the file carries sops metadata but cannot be read as
	// a sops file of its format.
	ErrMalformed = errors.New("not a readable sops file")
	// ErrUnsupported: the file uses a sops feature that only a build
	// with the kms tag reads (comment-driven encryption rules, Shamir key
	// groups). It wraps errors.ErrUnsupported.
	ErrUnsupported = fmt.Errorf("this build cannot read it: %w", errors.ErrUnsupported)
)

// DecryptError is a file that looks encrypted and could not be decrypted.
// Its message says why without quoting the file's content.
type DecryptError struct {
	Format Format
	// Reason is one of the sentinels above.
	Reason error
	// Detail adds safe specifics (recipients, which check failed).
	Detail string
	// Hint says how to get what the file needs, when this build lacks it.
	Hint string
}

func (e *DecryptError) Error() string {
	msg := "sops " + e.Format.String() + " file: "
	if e.Detail != "" {
		msg += e.Detail + ": "
	}
	msg += e.Reason.Error()
	if e.Hint != "" {
		msg += "; " + e.Hint
	}
	return msg
}

func (e *DecryptError) Unwrap() error { return e.Reason }

// Identities is a set of age identities. It is safe for concurrent use
// and never changes after it is made. A nil *Identities holds none: it
// passes plain files through and refuses encrypted ones.
type Identities struct {
	ids []age.Identity
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
	var ids []age.Identity
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

// needsKMS adds what a default build says about a file that needs a key
// type or a sops feature only the kms build reads.
func needsKMS(err error) error {
	err.(*DecryptError).Hint = "this build of flotilla opens age keys only; build it with -tags kms for AWS KMS, GCP KMS, Azure Key Vault, HashiCorp Vault, HuaweiCloud KMS and PGP keys (see docs/secrets.md)"
	return err
}

func (k *Identities) decrypt(f Format, data []byte) (plain []byte, err error) {
	fail := func(reason error, format string, args ...any) error {
		return &DecryptError{Format: f, Reason: reason, Detail: fmt.Sprintf(format, args...)}
	}
	// The parsers assume well-formed input in places; arbitrary bytes
	// from a repository must fail the file, not the controller.
	defer func() {
		if r := recover(); r != nil {
			plain, err = nil, fail(ErrMalformed, "")
		}
	}()

	if f == YAML && yamlHasAlias(data) {
		return nil, fail(ErrMalformed, "it uses YAML aliases, which sops never writes")
	}
	doc, err := parseDocument(f, data)
	if err != nil {
		// Nothing is decrypted yet: the text can only quote what the
		// repository holds as it is.
		return nil, fail(ErrMalformed, "%v", err)
	}
	meta, err := doc.metadata()
	if err != nil {
		return nil, fail(ErrMalformed, "%v", err)
	}
	rules, err := meta.compile()
	var libOnly errLibraryOnly
	switch {
	case errors.As(err, &libOnly):
		if withLibrary != nil {
			return withLibrary(k, f, data, ErrNoMatch, libOnly.Error())
		}
		return nil, needsKMS(fail(ErrUnsupported, "%v", libOnly))
	case err != nil:
		return nil, fail(ErrMalformed, "%v", err)
	}
	recipients, others := rules.recipients()
	// Key types this build does not open go to the library when it is
	// linked, and only when age cannot open the file.
	library := func() bool { return withLibrary != nil && len(others) > 0 }
	if len(recipients) == 0 {
		if library() {
			return withLibrary(k, f, data, ErrNoAgeRecipient, "encrypted only for "+strings.Join(others, ", "))
		}
		if len(others) == 0 {
			return nil, fail(ErrNoAgeRecipient, "no keys")
		}
		return nil, needsKMS(fail(ErrNoAgeRecipient, "encrypted only for %s", strings.Join(others, ", ")))
	}
	if k.Len() == 0 {
		if library() {
			return withLibrary(k, f, data, ErrNoIdentity, "no age identity, and "+strings.Join(others, ", ")+" keys")
		}
		return nil, fail(ErrNoIdentity, "")
	}
	dataKey, failed := k.dataKey(rules.groups[0])
	if dataKey == nil {
		if failed != nil {
			// A matching identity that still cannot open the data key
			// means the age stanza itself was altered.
			return nil, fail(ErrModified, "the data key does not decrypt (%v)", failed)
		}
		if library() {
			return withLibrary(k, f, data, ErrNoMatch, "recipients "+strings.Join(recipients, ", ")+", and "+strings.Join(others, ", ")+" keys")
		}
		if len(others) > 0 {
			return nil, needsKMS(fail(ErrNoMatch, "recipients %s, and %s keys", strings.Join(recipients, ", "), strings.Join(others, ", ")))
		}
		return nil, fail(ErrNoMatch, "recipients %s", strings.Join(recipients, ", "))
	}
	defer clear(dataKey)
	return openDocument(f, doc, rules, dataKey)
}

// openDocument decrypts every value of doc with the data key and checks
// the file's MAC.
func openDocument(f Format, doc document, rules *rules, dataKey []byte) ([]byte, error) {
	fail := func(reason error, format string, args ...any) error {
		return &DecryptError{Format: f, Reason: reason, Detail: fmt.Sprintf(format, args...)}
	}
	o, err := newOpener(rules, dataKey)
	if err != nil {
		return nil, fail(ErrModified, "the data key is not a sops data key")
	}
	out, err := doc.open(o)
	if errors.Is(err, errValue) {
		return nil, fail(ErrModified, "a value does not authenticate")
	}
	if err != nil {
		// Values are decrypted by now: say only what kind of thing failed.
		return nil, fail(ErrMalformed, "the file's structure is not what sops writes")
	}
	stored, err := o.open(rules.mac, rules.lastModified)
	storedMAC, _ := stored.(string)
	if err == nil && storedMAC == "" {
		clear(out)
		return nil, fail(ErrModified, "the MAC is missing")
	}
	// A stored MAC that does not authenticate was altered as surely as
	// one that differs.
	if err != nil || subtle.ConstantTimeCompare([]byte(storedMAC), []byte(o.sum())) != 1 {
		clear(out)
		return nil, fail(ErrModified, "MAC mismatch")
	}
	return out, nil
}

// dataKey opens the data key of a key group with the identities: the
// first age stanza one of them is a recipient of. failed is the first
// error that was not "not for these identities".
func (k *Identities) dataKey(g keyGroup) (key []byte, failed error) {
	for _, st := range g.Age {
		r, err := age.Decrypt(armor.NewReader(strings.NewReader(st.Enc)), k.ids...)
		if err == nil {
			key, err = io.ReadAll(r)
		}
		if err == nil {
			return key, nil
		}
		var noMatch *age.NoIdentityMatchError
		if !errors.As(err, &noMatch) && failed == nil {
			failed = err
		}
	}
	return nil, failed
}
