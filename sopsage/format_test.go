package sopsage_test

import (
	"bytes"
	"crypto/rand"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/getsops/sops/v3"
	"github.com/getsops/sops/v3/aes"
	agekey "github.com/getsops/sops/v3/age"
	"github.com/getsops/sops/v3/keys"
	"github.com/getsops/sops/v3/kms"
	"github.com/getsops/sops/v3/shamir"
	"gopkg.in/ini.v1"
	"gopkg.in/yaml.v3"

	"github.com/flotilla-gitops/flotilla/sopsage"
	"github.com/flotilla-gitops/flotilla/sopsage/sopsagetest"
)

// The package reads the sops format itself; these tests hold it to the
// sops library, which the test binary (not the controller) links: files
// the library encrypts with each format and option decrypt here to what
// the library decrypts them to.

// libEncrypt encrypts plain with the library for one group of age
// recipients, after tweak has set the metadata's options.
func libEncrypt(t *testing.T, f sopsage.Format, plain string, tweak func(*sops.Metadata), recipients ...string) []byte {
	t.Helper()
	st := sopsagetest.StoreFor(f)
	branches, err := st.LoadPlainFile([]byte(plain))
	if err != nil {
		t.Fatalf("load plaintext: %v", err)
	}
	dataKey := make([]byte, 32)
	rand.Read(dataKey)
	var group sops.KeyGroup
	for _, r := range recipients {
		mk, err := agekey.MasterKeyFromRecipient(r)
		if err != nil {
			t.Fatal(err)
		}
		if err := mk.Encrypt(dataKey); err != nil {
			t.Fatal(err)
		}
		group = append(group, keys.MasterKey(mk))
	}
	tree := sops.Tree{Branches: branches, Metadata: sops.Metadata{KeyGroups: []sops.KeyGroup{group}, Version: "3.9.0"}}
	if tweak != nil {
		tweak(&tree.Metadata)
	}
	return libSeal(t, st, tree, dataKey)
}

func libSeal(t *testing.T, st sopsagetest.Store, tree sops.Tree, dataKey []byte) []byte {
	t.Helper()
	m := &tree.Metadata
	if m.UnencryptedSuffix == "" && m.EncryptedSuffix == "" && m.UnencryptedRegex == "" && m.EncryptedRegex == "" && m.UnencryptedCommentRegex == "" && m.EncryptedCommentRegex == "" {
		m.UnencryptedSuffix = "_unencrypted"
	}
	cipher := aes.NewCipher()
	mac, err := tree.Encrypt(dataKey, cipher)
	if err != nil {
		t.Fatalf("encrypt: %v", err)
	}
	m.LastModified = time.Now().UTC().Truncate(time.Second)
	if m.MessageAuthenticationCode, err = cipher.Encrypt(mac, dataKey, m.LastModified.Format(time.RFC3339)); err != nil {
		t.Fatal(err)
	}
	out, err := st.EmitEncryptedFile(tree)
	if err != nil {
		t.Fatalf("emit: %v", err)
	}
	return out
}

// libDecrypt is what the library makes of enc with the identity.
func libDecrypt(t *testing.T, f sopsage.Format, enc []byte, id sopsagetest.Identity) []byte {
	t.Helper()
	st := sopsagetest.StoreFor(f)
	tree, err := st.LoadEncryptedFile(enc)
	if err != nil {
		t.Fatalf("library load: %v", err)
	}
	var ids agekey.ParsedIdentities
	if err := ids.Import(string(id.File)); err != nil {
		t.Fatal(err)
	}
	var dataKey []byte
	for _, k := range tree.Metadata.KeyGroups[0] {
		mk := k.(*agekey.MasterKey)
		ids.ApplyToMasterKey(mk)
		if dataKey, err = mk.Decrypt(); err == nil {
			break
		}
	}
	if dataKey == nil {
		t.Fatalf("library data key: %v", err)
	}
	if _, err := tree.Decrypt(dataKey, aes.NewCipher()); err != nil {
		t.Fatalf("library decrypt: %v", err)
	}
	out, err := st.EmitPlainFile(tree.Branches)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// sameContent compares two plaintexts by what they mean in their format:
// key order and values, not layout or comments.
func sameContent(t *testing.T, f sopsage.Format, got, want []byte) {
	t.Helper()
	norm := func(b []byte) any {
		switch f {
		case sopsage.YAML:
			var docs []any
			dec := yaml.NewDecoder(bytes.NewReader(b))
			for {
				var v any
				if err := dec.Decode(&v); err != nil {
					break
				}
				if v != nil {
					docs = append(docs, v)
				}
			}
			return docs
		case sopsage.JSON:
			var v any
			if err := json.Unmarshal(b, &v); err != nil {
				t.Fatalf("not JSON: %v\n%s", err, b)
			}
			return v
		case sopsage.Dotenv:
			var lines []string
			for _, l := range strings.Split(string(b), "\n") {
				if l != "" && !strings.HasPrefix(l, "#") {
					lines = append(lines, l)
				}
			}
			return lines
		case sopsage.INI:
			file, err := ini.Load(b)
			if err != nil {
				t.Fatalf("not INI: %v\n%s", err, b)
			}
			out := map[string]map[string]string{}
			for _, s := range file.Sections() {
				if len(s.Keys()) > 0 {
					out[s.Name()] = s.KeysHash()
				}
			}
			return out
		}
		return string(b)
	}
	if g, w := norm(got), norm(want); !reflect.DeepEqual(g, w) {
		t.Fatalf("decrypted content differs from the sops library's:\n got %#v\nwant %#v\n--- got\n%s\n--- library\n%s", g, w, got, want)
	}
}

func TestIdentities_Decrypt_agreesWithTheSopsLibrary(t *testing.T) {
	id := sopsagetest.NewIdentity(t)
	ids := mustIdentities(t, id)
	nested := `# a comment
db:
    user: app # trailing
    password: ` + secret + `
    port: 5432
    ratio: 0.25
    big: 1e+30
    tls: true
    nothing: null
    empty: ""
    zip: "02134"
    yes_string: "true"
    when: 2024-01-02T03:04:05Z
    multi: |
        line one
        line two
list:
    - a
    - 2
    - {k: v, n: 3}
    - [x, 4.5]
ünïcode: ✓
public_unencrypted:
    port: 8080
    flag: false
    names: [a, b]
`
	tests := []struct {
		name  string
		f     sopsage.Format
		plain string
		tweak func(*sops.Metadata)
	}{
		{"yaml, all value types", sopsage.YAML, nested, nil},
		{"yaml, encrypted_regex", sopsage.YAML, nested, func(m *sops.Metadata) { m.EncryptedRegex = "^(password|multi)$" }},
		{"yaml, unencrypted_regex", sopsage.YAML, nested, func(m *sops.Metadata) { m.UnencryptedRegex = "^(port|list)$" }},
		{"yaml, encrypted_suffix", sopsage.YAML, "a_secret: " + secret + "\nb: 2\nc:\n    d_secret: [1, x]\n", func(m *sops.Metadata) { m.EncryptedSuffix = "_secret" }},
		{"yaml, mac_only_encrypted", sopsage.YAML, nested, func(m *sops.Metadata) { m.MACOnlyEncrypted = true; m.EncryptedRegex = "^password$" }},
		{"yaml, several documents", sopsage.YAML, "a: " + secret + "\n---\nb: [1, 2]\n---\nc: {d: true}\n", nil},
		{"json, nested", sopsage.JSON, `{"password": "` + secret + `", "n": 1, "f": 2.5, "b": false, "z": null, "l": [1, "x", {"k": [true]}], "o": {"p": {"q": "r"}}, "pub_unencrypted": {"n": 7, "s": "t"}}`, nil},
		{"json, encrypted_regex", sopsage.JSON, `{"password": "` + secret + `", "port": 5432, "list": [1, 2]}`, func(m *sops.Metadata) { m.EncryptedRegex = "^password$" }},
		{"dotenv", sopsage.Dotenv, "# comment\nUSER=app\nPASSWORD=" + secret + "\nEMPTY=\nMULTI=one\\ntwo\nNOTE_unencrypted=public\n", nil},
		{"ini, sections", sopsage.INI, "top = level\n[db]\npassword = " + secret + "\nport = 5432\n; comment\n[cache]\nurl = redis://x\nkey_unencrypted = open\n", nil},
		{"binary", sopsage.Binary, "line\n" + secret + "\n\x00\x01 binary\n", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			enc := libEncrypt(t, tt.f, tt.plain, tt.tweak, id.Recipient, sopsagetest.NewIdentity(t).Recipient)
			if f, ok := sopsage.Detect("file", enc); !ok || (f != tt.f && !(tt.f == sopsage.Binary && f == sopsage.Binary)) {
				t.Fatalf("Detect = %v, %v; want %v", f, ok, tt.f)
			}
			got, err := ids.Decrypt(nameFor(tt.f), enc)
			if err != nil {
				t.Fatalf("Decrypt: %v\n%s", err, enc)
			}
			want := libDecrypt(t, tt.f, enc, id)
			if tt.f == sopsage.Binary {
				if !bytes.Equal(got, want) {
					t.Fatalf("binary: got %q, library %q", got, want)
				}
				return
			}
			sameContent(t, tt.f, got, want)
		})
	}
}

func nameFor(f sopsage.Format) string {
	switch f {
	case sopsage.YAML:
		return "f.yaml"
	case sopsage.JSON:
		return "f.json"
	case sopsage.Dotenv:
		return "f.env"
	case sopsage.INI:
		return "f.ini"
	}
	return "f.bin"
}

// An unencrypted value is covered by the MAC like an encrypted one, in
// each format: editing it is detected.
func TestIdentities_Decrypt_refusesAnEditedUnencryptedValueInEveryFormat(t *testing.T) {
	id := sopsagetest.NewIdentity(t)
	ids := mustIdentities(t, id)
	for _, tt := range []struct {
		f     sopsage.Format
		plain string
	}{
		{sopsage.YAML, "a: " + secret + "\nport_unencrypted: 5432\n"},
		{sopsage.JSON, `{"a": "` + secret + `", "port_unencrypted": 5432}`},
		{sopsage.Dotenv, "A=" + secret + "\nPORT_unencrypted=5432\n"},
		{sopsage.INI, "[s]\na = " + secret + "\nport_unencrypted = 5432\n"},
	} {
		enc := libEncrypt(t, tt.f, tt.plain, nil, id.Recipient)
		if _, err := ids.Decrypt(nameFor(tt.f), enc); err != nil {
			t.Fatalf("%s: unedited file refused: %v", tt.f, err)
		}
		edited := bytes.Replace(enc, []byte("5432"), []byte("5433"), 1)
		_, err := ids.Decrypt(nameFor(tt.f), edited)
		if !errors.Is(err, sopsage.ErrModified) || !strings.Contains(err.Error(), "MAC mismatch") {
			t.Errorf("%s: edited unencrypted value: %v; want a MAC mismatch", tt.f, err)
		}
	}
}

// withKMSKey adds an AWS KMS key to the file's single key group, as
// `sops --kms ARN --age R` would.
func withKMSKey(m *sops.Metadata) {
	m.KeyGroups[0] = append(m.KeyGroups[0], &kms.MasterKey{Arn: "arn:aws:kms:eu-west-1:111122223333:key/flotilla-test", EncryptedKey: "AQICAHg=", CreationDate: time.Now().UTC()})
}

func TestIdentities_Decrypt_fileNeedingACloudKeySaysWhichAndHowToGetIt(t *testing.T) {
	id := sopsagetest.NewIdentity(t)
	ids := mustIdentities(t, id)
	onlyKMS := func(m *sops.Metadata) { m.KeyGroups = []sops.KeyGroup{{}}; withKMSKey(m) }

	enc := libEncrypt(t, sopsage.YAML, "password: "+secret+"\n", onlyKMS)
	_, err := ids.Decrypt("s.yaml", enc)
	if !errors.Is(err, sopsage.ErrNoAgeRecipient) {
		t.Fatalf("KMS-only file: %v; want ErrNoAgeRecipient", err)
	}
	if withLibraryBuilt {
		return
	}
	for _, want := range []string{"encrypted only for kms", "-tags kms", "docs/secrets.md"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("KMS-only file: %q does not say %q", err, want)
		}
	}

	// Age and KMS: an identity that matches needs no KMS at all; one that
	// does not is told the KMS key exists.
	enc = libEncrypt(t, sopsage.YAML, "password: "+secret+"\n", withKMSKey, id.Recipient)
	if got, err := ids.Decrypt("s.yaml", enc); err != nil || !bytes.Contains(got, []byte(secret)) {
		t.Fatalf("age and KMS, matching identity: %q, %v", got, err)
	}
	_, err = mustIdentities(t, sopsagetest.NewIdentity(t)).Decrypt("s.yaml", enc)
	if !errors.Is(err, sopsage.ErrNoMatch) || !strings.Contains(err.Error(), "kms keys") || !strings.Contains(err.Error(), "-tags kms") {
		t.Errorf("age and KMS, other identity: %v; want ErrNoMatch naming the kms keys and the build tag", err)
	}
}

// shamirFile encrypts plain with two key groups of one age recipient each,
// both needed (threshold 2).
func shamirFile(t *testing.T, plain string, a, b sopsagetest.Identity) []byte {
	t.Helper()
	st := sopsagetest.StoreFor(sopsage.YAML)
	branches, err := st.LoadPlainFile([]byte(plain))
	if err != nil {
		t.Fatal(err)
	}
	dataKey := make([]byte, 32)
	rand.Read(dataKey)
	parts, err := shamir.Split(dataKey, 2, 2)
	if err != nil {
		t.Fatal(err)
	}
	var groups []sops.KeyGroup
	for i, r := range []string{a.Recipient, b.Recipient} {
		mk, err := agekey.MasterKeyFromRecipient(r)
		if err != nil {
			t.Fatal(err)
		}
		if err := mk.Encrypt(parts[i]); err != nil {
			t.Fatal(err)
		}
		groups = append(groups, sops.KeyGroup{mk})
	}
	return libSeal(t, st, sops.Tree{Branches: branches, Metadata: sops.Metadata{KeyGroups: groups, ShamirThreshold: 2, Version: "3.9.0"}}, dataKey)
}

func TestIdentities_Decrypt_shamirKeyGroupsNeedTheKMSBuild(t *testing.T) {
	if withLibraryBuilt {
		t.Skip("the kms build reads key groups (library_kms_test.go)")
	}
	a, b := sopsagetest.NewIdentity(t), sopsagetest.NewIdentity(t)
	ids, err := sopsage.ParseIdentities(append(bytes.Clone(a.File), b.File...))
	if err != nil {
		t.Fatal(err)
	}
	_, err = ids.Decrypt("s.yaml", shamirFile(t, "password: "+secret+"\n", a, b))
	if !errors.Is(err, sopsage.ErrUnsupported) || !errors.Is(err, errors.ErrUnsupported) {
		t.Fatalf("Shamir file: %v; want ErrUnsupported", err)
	}
	for _, want := range []string{"2 key groups", "-tags kms"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("Shamir file: %q does not say %q", err, want)
		}
	}
}
