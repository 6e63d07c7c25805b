// Package sopsagetest makes age identities and sops-encrypted files for
// tests, with the sops library itself, so no sops or age binary is needed
// and the fixtures are exactly what `sops --encrypt --age ...` writes.
package sopsagetest

import (
	"crypto/rand"
	"testing"
	"time"

	"filippo.io/age"
	"github.com/getsops/sops/v3"
	"github.com/getsops/sops/v3/aes"
	agekey "github.com/getsops/sops/v3/age"
	"github.com/getsops/sops/v3/config"
	"github.com/getsops/sops/v3/keys"
	"github.com/getsops/sops/v3/stores/dotenv"
	"github.com/getsops/sops/v3/stores/ini"
	sopsjson "github.com/getsops/sops/v3/stores/json"
	sopsyaml "github.com/getsops/sops/v3/stores/yaml"

	"github.com/flotilla-gitops/flotilla/sopsage"
)

// Identity is a fresh age identity: the text of an identity file holding
// it, and the recipient files are encrypted for.
type Identity struct {
	File      []byte
	Recipient string
}

// NewIdentity generates an X25519 identity.
func NewIdentity(t testing.TB) Identity {
	t.Helper()
	id, err := age.GenerateX25519Identity()
	if err != nil {
		t.Fatal(err)
	}
	text := "# created: for a test\n# public key: " + id.Recipient().String() + "\n" + id.String() + "\n"
	return Identity{File: []byte(text), Recipient: id.Recipient().String()}
}

// Store is the sops library's own store for a format: what the tests hold
// sopsage's reader to.
type Store interface {
	LoadPlainFile(in []byte) (sops.TreeBranches, error)
	LoadEncryptedFile(in []byte) (sops.Tree, error)
	EmitEncryptedFile(in sops.Tree) ([]byte, error)
	EmitPlainFile(in sops.TreeBranches) ([]byte, error)
}

// StoreFor is the library's store for f.
func StoreFor(f sopsage.Format) Store {
	switch f {
	case sopsage.YAML:
		return sopsyaml.NewStore(&config.YAMLStoreConfig{})
	case sopsage.JSON:
		return sopsjson.NewStore(&config.JSONStoreConfig{})
	case sopsage.Dotenv:
		return dotenv.NewStore(&config.DotenvStoreConfig{})
	case sopsage.INI:
		return ini.NewStore(&config.INIStoreConfig{})
	}
	return sopsjson.NewBinaryStore(&config.JSONBinaryStoreConfig{})
}

// Encrypt encrypts plain for recipients in the format sops picks for
// file's name, as `sops --encrypt` does with its default settings.
func Encrypt(t testing.TB, file string, plain []byte, recipients ...string) []byte {
	t.Helper()
	return EncryptAs(t, sopsage.FormatOf(file), plain, recipients...)
}

// EncryptAs is Encrypt with the format given, as --input-type does.
func EncryptAs(t testing.TB, f sopsage.Format, plain []byte, recipients ...string) []byte {
	t.Helper()
	return encrypt(t, f, plain, "", recipients)
}

// EncryptMatching is Encrypt with --encrypted-regex: only the values of keys
// matching regex are encrypted, the rest of the file stays readable.
func EncryptMatching(t testing.TB, file string, plain []byte, regex string, recipients ...string) []byte {
	t.Helper()
	return encrypt(t, sopsage.FormatOf(file), plain, regex, recipients)
}

func encrypt(t testing.TB, f sopsage.Format, plain []byte, regex string, recipients []string) []byte {
	t.Helper()
	st := StoreFor(f)
	branches, err := st.LoadPlainFile(plain)
	if err != nil {
		t.Fatalf("sopsagetest: load plaintext as %s: %v", f, err)
	}
	dataKey := make([]byte, 32)
	if _, err := rand.Read(dataKey); err != nil {
		t.Fatal(err)
	}
	var group sops.KeyGroup
	for _, r := range recipients {
		mk, err := agekey.MasterKeyFromRecipient(r)
		if err != nil {
			t.Fatalf("sopsagetest: recipient: %v", err)
		}
		if err := mk.Encrypt(dataKey); err != nil {
			t.Fatalf("sopsagetest: encrypt data key: %v", err)
		}
		group = append(group, keys.MasterKey(mk))
	}
	tree := sops.Tree{
		Branches: branches,
		Metadata: sops.Metadata{
			KeyGroups:         []sops.KeyGroup{group},
			UnencryptedSuffix: unencryptedSuffix(regex),
			EncryptedRegex:    regex,
			// What the metadata claims; decryption does not depend on it.
			Version: "3.9.0",
		},
	}
	cipher := aes.NewCipher()
	mac, err := tree.Encrypt(dataKey, cipher)
	if err != nil {
		t.Fatalf("sopsagetest: encrypt: %v", err)
	}
	tree.Metadata.LastModified = time.Now().UTC()
	tree.Metadata.MessageAuthenticationCode, err = cipher.Encrypt(mac, dataKey, tree.Metadata.LastModified.Format(time.RFC3339))
	if err != nil {
		t.Fatalf("sopsagetest: encrypt MAC: %v", err)
	}
	out, err := st.EmitEncryptedFile(tree)
	if err != nil {
		t.Fatalf("sopsagetest: emit: %v", err)
	}
	return out
}

// unencryptedSuffix is sops's default, which it leaves out when a regex
// chooses what is encrypted (the two are exclusive).
func unencryptedSuffix(regex string) string {
	if regex != "" {
		return ""
	}
	return "_unencrypted"
}
