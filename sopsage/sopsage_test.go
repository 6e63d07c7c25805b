package sopsage_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/flotilla-gitops/flotilla/sopsage"
	"github.com/flotilla-gitops/flotilla/sopsage/sopsagetest"
)

const secret = "s3cr3t-hunter2"

func mustIdentities(t testing.TB, id sopsagetest.Identity) *sopsage.Identities {
	t.Helper()
	ids, err := sopsage.ParseIdentities(id.File)
	if err != nil {
		t.Fatal(err)
	}
	return ids
}

// fixtures are plaintexts in each format sops writes, each holding secret.
var fixtures = []struct {
	file  string
	plain string
	want  sopsage.Format
}{
	{"secrets/db.yaml", "user: app\npassword: " + secret + "\nport: 5432\n", sopsage.YAML},
	{"secrets/db.yml", "list:\n    - " + secret + "\n", sopsage.YAML},
	{"secrets/db.json", `{"password": "` + secret + `", "n": 1}`, sopsage.JSON},
	{"config/app.env", "USER=app\nPASSWORD=" + secret + "\n", sopsage.Dotenv},
	{".env", "PASSWORD=" + secret + "\n", sopsage.Dotenv},
	{"config/app.ini", "[db]\npassword = " + secret + "\n", sopsage.INI},
	{"secrets/db_password.txt", secret, sopsage.Binary},
	{"secrets/cert.pem", "-----BEGIN X-----\n" + secret + "\n\x00\xff binary\n", sopsage.Binary},
}

func TestIdentities_Decrypt_roundTrip(t *testing.T) {
	id := sopsagetest.NewIdentity(t)
	ids := mustIdentities(t, id)
	for _, fx := range fixtures {
		t.Run(fx.file, func(t *testing.T) {
			enc := sopsagetest.Encrypt(t, fx.file, []byte(fx.plain), id.Recipient)
			if bytes.Contains(enc, []byte(secret)) {
				t.Fatalf("fixture holds the plaintext:\n%s", enc)
			}
			if f, ok := sopsage.Detect(fx.file, enc); !ok || f != fx.want {
				t.Fatalf("Detect = %v, %v; want %v, true", f, ok, fx.want)
			}
			got, err := ids.Decrypt(fx.file, enc)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Contains(got, []byte(secret)) {
				t.Fatalf("plaintext lost:\n%s", got)
			}
			if fx.want == sopsage.Binary && string(got) != fx.plain {
				t.Fatalf("binary round trip changed the content: %q", got)
			}
		})
	}
}

func TestIdentities_Decrypt_plainFilesPassThrough(t *testing.T) {
	ids := mustIdentities(t, sopsagetest.NewIdentity(t))
	var none *sopsage.Identities
	for _, fx := range fixtures {
		for _, k := range []*sopsage.Identities{ids, none} {
			got, err := k.Decrypt(fx.file, []byte(fx.plain))
			if err != nil || string(got) != fx.plain {
				t.Errorf("%s: Decrypt = %q, %v; want it unchanged", fx.file, got, err)
			}
		}
	}
	// Mentions of sops that are not its metadata.
	for file, text := range map[string]string{
		"compose.yaml": "services:\n  sops:\n    image: mac\n",
		"a.json":       `{"sops": "mac"}`,
		"a.env":        "SOPS_MAC=1\n# sops_mac=x\n",
		"a.ini":        "[other]\nmac = 1\n[sops]\n",
		"a.bin":        "sops mac \x00\x01",
	} {
		if _, ok := sopsage.Detect(file, []byte(text)); ok {
			t.Errorf("%s: %q detected as encrypted", file, text)
		}
	}
}

func TestDetect_otherFormatUnderAnyName(t *testing.T) {
	id := sopsagetest.NewIdentity(t)
	// `sops -e --input-type dotenv db.secrets`: the name says binary.
	enc := sopsagetest.EncryptAs(t, sopsage.Dotenv, []byte("PASSWORD="+secret+"\n"), id.Recipient)
	if f, ok := sopsage.Detect("db.secrets", enc); !ok || f != sopsage.Dotenv {
		t.Fatalf("Detect = %v, %v; want dotenv", f, ok)
	}
	got, err := mustIdentities(t, id).Decrypt("db.secrets", enc)
	if err != nil || !strings.Contains(string(got), "PASSWORD="+secret) {
		t.Fatalf("Decrypt = %q, %v", got, err)
	}
	// An encrypted JSON document renamed to .txt is JSON, not binary.
	enc = sopsagetest.EncryptAs(t, sopsage.JSON, []byte(`{"a": "`+secret+`"}`), id.Recipient)
	if f, ok := sopsage.Detect("x.txt", enc); !ok || f != sopsage.JSON {
		t.Fatalf("Detect = %v, %v; want json", f, ok)
	}
}

func TestIdentities_Decrypt_refusals(t *testing.T) {
	id := sopsagetest.NewIdentity(t)
	other := sopsagetest.NewIdentity(t)
	ids := mustIdentities(t, id)
	yamlEnc := sopsagetest.Encrypt(t, "s.yaml", []byte("password: "+secret+"\nnote_unencrypted: public\n"), id.Recipient)
	binEnc := sopsagetest.Encrypt(t, "s.txt", []byte(secret), id.Recipient)

	tests := []struct {
		name   string
		ids    *sopsage.Identities
		file   string
		data   []byte
		reason error
		msg    string
	}{
		{"no identity configured", nil, "s.yaml", yamlEnc, sopsage.ErrNoIdentity, "no age identity is configured"},
		{"wrong identity", mustIdentities(t, other), "s.yaml", yamlEnc, sopsage.ErrNoMatch, id.Recipient},
		{"wrong identity, binary", mustIdentities(t, other), "s.txt", binEnc, sopsage.ErrNoMatch, "no age identity matches the file's recipients"},
		{"value ciphertext flipped", ids, "s.yaml", flipAfter(t, yamlEnc, "password: ENC[AES256_GCM,data:"), sopsage.ErrModified, "a value does not authenticate"},
		{"binary ciphertext flipped", ids, "s.txt", flipAfter(t, binEnc, `"data": "ENC[AES256_GCM,data:`), sopsage.ErrModified, "modified after encryption"},
		{"MAC flipped", ids, "s.yaml", flipAfter(t, yamlEnc, "mac: ENC[AES256_GCM,data:"), sopsage.ErrModified, "MAC mismatch: the file was modified after encryption"},
		{"unencrypted value edited", ids, "s.yaml", bytes.Replace(yamlEnc, []byte("public"), []byte("edited"), 1), sopsage.ErrModified, "MAC mismatch"},
		{"MAC removed", ids, "s.yaml", replaceLine(yamlEnc, "    mac: ", "    mac: \"\""), sopsage.ErrModified, "MAC is missing"},
		{"age stanza altered", ids, "s.yaml", flipAfter(t, yamlEnc, "-----BEGIN AGE ENCRYPTED FILE-----\n            "), sopsage.ErrModified, "data key"},
		{"no age recipient", ids, "s.txt", pgpOnly(t, binEnc), sopsage.ErrNoAgeRecipient, "encrypted only for pgp"},
		{"value is not a string", ids, "s.yaml", replaceLine(yamlEnc, "password: ", "password: 42"), sopsage.ErrMalformed, ""},
		{"metadata only", ids, "s.yaml", []byte("sops:\n    mac: x\n"), sopsage.ErrMalformed, ""},
		{"alias bomb", ids, "s.yaml", aliasBomb(12), sopsage.ErrMalformed, "YAML aliases"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := tt.ids.Decrypt(tt.file, tt.data)
			if err == nil {
				t.Fatalf("decrypted to %q; want a refusal", got)
			}
			if got != nil {
				t.Errorf("returned %d bytes with the error", len(got))
			}
			var de *sopsage.DecryptError
			if !errors.As(err, &de) {
				t.Fatalf("error %T %v is not a *DecryptError", err, err)
			}
			if tt.reason != nil && !errors.Is(err, tt.reason) {
				t.Errorf("error %q does not wrap %q", err, tt.reason)
			}
			if !strings.Contains(err.Error(), tt.msg) {
				t.Errorf("error %q does not say %q", err, tt.msg)
			}
			if strings.Contains(err.Error(), secret) {
				t.Errorf("error quotes the plaintext: %q", err)
			}
		})
	}
}

// flipAfter changes the base64 character that follows marker.
func flipAfter(t *testing.T, data []byte, marker string) []byte {
	t.Helper()
	i := bytes.Index(data, []byte(marker))
	if i < 0 {
		t.Fatalf("marker %q not in:\n%s", marker, data)
	}
	out := bytes.Clone(data)
	j := i + len(marker) + 2
	if out[j] == 'A' {
		out[j] = 'B'
	} else {
		out[j] = 'A'
	}
	return out
}

// aliasBomb is a few hundred bytes of YAML that expand to 9^levels values,
// with sops metadata so that it is detected.
func aliasBomb(levels int) []byte {
	var b strings.Builder
	b.WriteString("l0: &l0 [x, x, x, x, x, x, x, x, x]\n")
	for i := 1; i < levels; i++ {
		p := fmt.Sprintf("*l%d", i-1)
		fmt.Fprintf(&b, "l%d: &l%d [%s]\n", i, i, strings.Repeat(p+", ", 8)+p)
	}
	b.WriteString("sops:\n  mac: x\n  age: [{recipient: r, enc: e}]\n  lastmodified: '2020-01-01T00:00:00Z'\n")
	return []byte(b.String())
}

// pgpOnly rewrites the metadata of a binary-format file to name one PGP
// key instead of its age recipients.
func pgpOnly(t *testing.T, data []byte) []byte {
	t.Helper()
	var doc struct {
		Data string         `json:"data"`
		Sops map[string]any `json:"sops"`
	}
	if err := json.Unmarshal(data, &doc); err != nil {
		t.Fatal(err)
	}
	delete(doc.Sops, "age")
	doc.Sops["pgp"] = []any{map[string]any{"fp": "0123ABCD", "created_at": "2024-01-01T00:00:00Z", "enc": "x"}}
	out, err := json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// replaceLine replaces the first line starting with prefix.
func replaceLine(data []byte, prefix, with string) []byte {
	var b strings.Builder
	done := false
	for line := range strings.Lines(string(data)) {
		if !done && strings.HasPrefix(line, prefix) {
			b.WriteString(with + "\n")
			done = true
			continue
		}
		b.WriteString(line)
	}
	return []byte(b.String())
}

func TestParseIdentities(t *testing.T) {
	id := sopsagetest.NewIdentity(t)
	ids, err := sopsage.ParseIdentities(append(append([]byte("\n# two keys\n"), id.File...), sopsagetest.NewIdentity(t).File...))
	if err != nil || ids.Len() != 2 {
		t.Fatalf("ParseIdentities = %v, %v; want 2 identities", ids.Len(), err)
	}
	key := "AGE-SECRET-KEY-1NOTAREALKEYATALLNOTAREALKEYATALL"
	_, err = sopsage.ParseIdentities([]byte("# c\n" + key + "\n"))
	if err == nil || !strings.Contains(err.Error(), "line 2") || strings.Contains(err.Error(), "NOTAREAL") {
		t.Errorf("bad key line: %v; want line 2 named and the line not quoted", err)
	}
	if _, err := sopsage.ParseIdentities([]byte("# only comments\n\n")); err == nil {
		t.Error("a file without identities was accepted")
	}
}

func FuzzDecrypt(f *testing.F) {
	id := sopsagetest.NewIdentity(f)
	ids := mustIdentities(f, id)
	for _, fx := range fixtures {
		f.Add(fx.file, []byte(fx.plain))
		f.Add(fx.file, sopsagetest.Encrypt(f, fx.file, []byte(fx.plain), id.Recipient))
	}
	f.Add("a.yaml", []byte("sops:\n  mac: x\n  age: [{recipient: r, enc: e}]\n"))
	f.Add("a.yaml", []byte("a: &x [*x]\nsops: {mac: 1}\n"))
	f.Add("a.json", []byte(`{"sops":{"mac":"","age":[{"recipient":"x","enc":"y"}]},"data":7}`))
	f.Add("a.env", []byte("sops_mac=\nsops_age__list_0__map_recipient=x\nA"))
	f.Add("a.ini", []byte("[sops]\nmac = x\n"))
	f.Fuzz(func(t *testing.T, file string, data []byte) {
		in := bytes.Clone(data)
		// Input that makes decryption crawl is a denial of service on the
		// controller; crash so the fuzzer keeps the input.
		done := make(chan struct{})
		defer close(done)
		go func() {
			select {
			case <-done:
			case <-time.After(10 * time.Second):
				panic(fmt.Sprintf("Decrypt(%q) ran for over 10s on %q", file, in))
			}
		}()
		out, err := ids.Decrypt(file, data)
		if _, ok := sopsage.Detect(file, data); !ok && (err != nil || !bytes.Equal(out, in)) {
			t.Fatalf("a file that does not look encrypted was changed: %v", err)
		}
		if err != nil && out != nil {
			t.Fatal("output returned with an error")
		}
	})
}

// The sops library looks for age keys in the environment and the user's
// config directory whenever a key has no identities of its own. Put the
// right key in every such place: decryption must still use only what it
// was given.
func TestIdentities_Decrypt_neverReadsTheEnvironment(t *testing.T) {
	id := sopsagetest.NewIdentity(t)
	enc := sopsagetest.Encrypt(t, "s.yaml", []byte("password: "+secret+"\n"), id.Recipient)

	dir := t.TempDir()
	keyFile := filepath.Join(dir, "keys.txt")
	if err := os.MkdirAll(filepath.Join(dir, "sops", "age"), 0o700); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{keyFile, filepath.Join(dir, "sops", "age", "keys.txt")} {
		if err := os.WriteFile(p, id.File, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv("SOPS_AGE_KEY", string(id.File))
	t.Setenv("SOPS_AGE_KEY_FILE", keyFile)
	t.Setenv("XDG_CONFIG_HOME", dir)
	t.Setenv("HOME", dir)

	for name, ids := range map[string]*sopsage.Identities{
		"no identities":    nil,
		"another identity": mustIdentities(t, sopsagetest.NewIdentity(t)),
	} {
		if got, err := ids.Decrypt("s.yaml", enc); err == nil {
			t.Errorf("%s: decrypted with a key from the environment: %q", name, got)
		}
	}
}
