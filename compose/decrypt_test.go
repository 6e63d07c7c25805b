package compose

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/flotilla-gitops/flotilla/sopsage"
	"github.com/flotilla-gitops/flotilla/sopsage/sopsagetest"
)

// Plaintexts in testdata/sops that must end up where they belong and
// nowhere else.
const (
	sopsPassword = "pw-0b8d-plaintext"  // db_password.txt, a secret
	sopsToken    = "tok-9c1e-plaintext" // app.env, the service's env_file
	sopsDBUser   = "deploy-user-7f3a"   // deploy.env, interpolation
	sopsStack    = "sopsdemo"
)

// sopsProject copies testdata/sops into a fresh checkout, encrypting the
// files named in encrypted for id, and returns its Dir, with the
// identity's decrypter.
func sopsProject(t *testing.T, id sopsagetest.Identity, encrypted ...string) Dir {
	t.Helper()
	root := t.TempDir()
	dir := filepath.Join(root, "stack")
	if err := os.CopyFS(dir, os.DirFS("testdata/sops")); err != nil {
		t.Fatal(err)
	}
	for _, name := range encrypted {
		sopsEncryptFile(t, filepath.Join(dir, name), id.Recipient)
	}
	ids, err := sopsage.ParseIdentities(id.File)
	if err != nil {
		t.Fatal(err)
	}
	return Dir{Root: root, Path: "stack", EnvFiles: []string{"deploy.env"}, Decrypt: ids.Decrypt, SealKey: ids.SealKey()}
}

// sopsEncryptFile encrypts a file in place, as `sops -e -i` would.
func sopsEncryptFile(t *testing.T, path, recipient string) {
	t.Helper()
	plain, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, sopsagetest.Encrypt(t, path, plain, recipient), 0o644); err != nil {
		t.Fatal(err)
	}
}

// serviceEnv is the env the app service is deployed with: the manifest
// converted and its sealed values put back, as the backend does.
func serviceEnv(t *testing.T, r *Rendered) []string {
	t.Helper()
	st := mustConvert(t, r, sopsStack)
	if err := Unseal(st, r.Sealed); err != nil {
		t.Fatalf("Unseal: %v", err)
	}
	svc, ok := st.Services[sopsStack+"_app"]
	if !ok {
		t.Fatalf("no service app in %v", sortedKeys(st.Services))
	}
	return svc.TaskTemplate.ContainerSpec.Env
}

func TestRenderDecryptsSopsFilesInMemory(t *testing.T) {
	id := sopsagetest.NewIdentity(t)
	for _, tc := range []struct {
		name      string
		encrypted []string
		warnings  int // the whole compose file encrypted: its image, too
	}{
		{"secret, env file and interpolation file", []string{"db_password.txt", "app.env", "deploy.env"}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := sopsProject(t, id, tc.encrypted...)
			for _, name := range tc.encrypted {
				data, _ := os.ReadFile(filepath.Join(d.Root, d.Path, name))
				if _, ok := sopsage.Detect(name, data); !ok {
					t.Fatalf("fixture %s is not encrypted", name)
				}
			}
			r := mustRender(t, sopsStack, d)

			// The secret's plaintext is in memory only.
			var secretName string
			for name, data := range r.Secrets {
				if string(data) == sopsPassword {
					secretName = name
				}
			}
			if secretName == "" || !strings.HasPrefix(secretName, sopsStack+"_db_password-") {
				t.Fatalf("Rendered.Secrets holds %v, none with the decrypted password", sortedKeys(r.Secrets))
			}
			if strings.Contains(r.Manifest, sopsPassword) {
				t.Errorf("secret plaintext in the manifest:\n%s", r.Manifest)
			}
			if !strings.Contains(r.Manifest, secretName) || !strings.Contains(r.Manifest, "hmacSHA256: ") {
				t.Errorf("manifest lacks the secret's name or keyed digest:\n%s", r.Manifest)
			}
			// A plain hash of a decrypted secret is readable by anyone who
			// reads the record, so neither its name nor the manifest has one.
			if plain := digest([]byte(sopsPassword)); strings.Contains(r.Manifest, plain[:hashLen]) {
				t.Errorf("manifest holds the plain sha256 of the decrypted secret:\n%s", r.Manifest)
			}
			// No decrypted env value is in the manifest either: each is a
			// placeholder whose plaintext travels in Rendered.Sealed.
			for _, plain := range []string{sopsToken, sopsDBUser} {
				if strings.Contains(r.Manifest, plain) {
					t.Errorf("decrypted env value %q in the manifest:\n%s", plain, r.Manifest)
				}
			}
			// Nothing is passed on as ciphertext.
			if strings.Contains(r.Manifest, "ENC[") || strings.Contains(r.Manifest, "sops_mac") || strings.Contains(r.Manifest, "mac:") {
				t.Errorf("ciphertext or sops metadata in the manifest:\n%s", r.Manifest)
			}
			// Env files land in the service environment, as the user meant.
			env := serviceEnv(t, r)
			for _, want := range []string{"API_TOKEN=" + sopsToken, "DB_USER=" + sopsDBUser, "LOG_LEVEL=info", "GREETING=plain-greeting"} {
				if !slices.Contains(env, want) {
					t.Errorf("service env %q lacks %q", env, want)
				}
			}
			if len(r.Warnings) != tc.warnings {
				t.Errorf("warnings: %q", r.Warnings)
			}
		})
	}
}

func TestRenderLeavesPlainFilesAloneWithADecrypter(t *testing.T) {
	id := sopsagetest.NewIdentity(t)
	plainDir := sopsProject(t, id)
	withKeys := mustRender(t, sopsStack, plainDir)
	plainDir.Decrypt = nil
	without := mustRender(t, sopsStack, plainDir)
	if withKeys.Manifest != without.Manifest {
		t.Fatalf("a decrypter changed a plain project:\n%s\n---\n%s", withKeys.Manifest, without.Manifest)
	}
	// And the project of the other tests renders as before.
	d := fixture(t)
	before := mustRender(t, "demo", d)
	d.Decrypt = mustIdentities(t, id).Decrypt
	if after := mustRender(t, "demo", d); after.Manifest != before.Manifest {
		t.Fatal("a decrypter changed the stack fixture's manifest")
	}
}

func mustIdentities(t *testing.T, id sopsagetest.Identity) *sopsage.Identities {
	t.Helper()
	ids, err := sopsage.ParseIdentities(id.File)
	if err != nil {
		t.Fatal(err)
	}
	return ids
}

func TestRenderPlansAnUpgradeOnlyWhenDecryptedContentChanges(t *testing.T) {
	id := sopsagetest.NewIdentity(t)
	d := sopsProject(t, id, "db_password.txt", "app.env", "deploy.env")
	first := mustRender(t, sopsStack, d)

	// Encrypting the same plaintext again gives new ciphertext (a new data
	// key and IVs): nothing to deploy.
	secretPath := filepath.Join(d.Root, d.Path, "db_password.txt")
	before, _ := os.ReadFile(secretPath)
	if err := os.WriteFile(secretPath, []byte(sopsPassword), 0o644); err != nil {
		t.Fatal(err)
	}
	sopsEncryptFile(t, secretPath, id.Recipient)
	if after, _ := os.ReadFile(secretPath); string(after) == string(before) {
		t.Fatal("re-encryption gave identical bytes; the test proves nothing")
	}
	if again := mustRender(t, sopsStack, d); again.Manifest != first.Manifest {
		t.Errorf("re-encrypting unchanged plaintext changed the manifest")
	}

	// A new password is a new secret name, so it plans as an upgrade.
	if err := os.WriteFile(secretPath, []byte(sopsPassword+"-rotated"), 0o644); err != nil {
		t.Fatal(err)
	}
	sopsEncryptFile(t, secretPath, id.Recipient)
	rotated := mustRender(t, sopsStack, d)
	if rotated.Manifest == first.Manifest {
		t.Fatal("a changed encrypted secret left the manifest unchanged")
	}
	if slices.Equal(sortedKeys(rotated.Secrets), sortedKeys(first.Secrets)) {
		t.Errorf("secret name did not change: %v", sortedKeys(rotated.Secrets))
	}
	if strings.Contains(rotated.Manifest, sopsPassword) {
		t.Error("rotated secret plaintext in the manifest")
	}
}

func TestRenderRefusesSopsFilesItCannotDecrypt(t *testing.T) {
	id := sopsagetest.NewIdentity(t)
	other := mustIdentities(t, sopsagetest.NewIdentity(t))

	tamperMAC := func(t *testing.T, d Dir, name string) {
		p := filepath.Join(d.Root, d.Path, name)
		data, _ := os.ReadFile(p)
		i := strings.Index(string(data), "sops_mac=ENC[AES256_GCM,data:")
		if i < 0 {
			i = strings.Index(string(data), `"mac": "ENC[AES256_GCM,data:`)
		}
		if i < 0 {
			t.Fatalf("no MAC in %s", data)
		}
		j := i + len(`"mac": "ENC[AES256_GCM,data:`) + 1
		data[j] ^= 'A' ^ 'B'
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	tamperValue := func(t *testing.T, d Dir, name string) {
		p := filepath.Join(d.Root, d.Path, name)
		data, _ := os.ReadFile(p)
		s := strings.Replace(string(data), "API_TOKEN=ENC[AES256_GCM,data:", "API_TOKEN=ENC[AES256_GCM,data:AA", 1)
		if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}

	tests := []struct {
		name    string
		file    string // the encrypted file that fails
		mangle  func(*testing.T, Dir, string)
		decrypt DecryptFunc
		want    []string // in the message
		reason  error
		field   string
	}{
		{"wrong key, interpolation env file", "deploy.env", nil, other.Decrypt,
			[]string{"file stack/deploy.env", "no age identity matches the file's recipients", id.Recipient}, sopsage.ErrNoMatch, ""},
		{"wrong key, secret file", "db_password.txt", nil, other.Decrypt,
			[]string{"file stack/compose.yaml", "field secrets.db_password.file", "decrypt stack/db_password.txt", "no age identity matches"}, sopsage.ErrNoMatch, "secrets.db_password.file"},
		{"no key configured", "app.env", nil, nil,
			[]string{"field services.app.env_file", "decrypt stack/app.env", "no age identity is configured"}, sopsage.ErrNoIdentity, "services.app.env_file"},
		{"wrong key, compose file", "compose.yaml", nil, other.Decrypt,
			[]string{"file stack/compose.yaml", "no age identity matches"}, sopsage.ErrNoMatch, ""},
		{"MAC tampered, secret file", "db_password.txt", tamperMAC, nil,
			[]string{"decrypt stack/db_password.txt", "MAC mismatch: the file was modified after encryption"}, sopsage.ErrModified, "secrets.db_password.file"},
		{"value tampered, env file", "app.env", tamperValue, nil,
			[]string{"decrypt stack/app.env", "the file was modified after encryption"}, sopsage.ErrModified, "services.app.env_file"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := sopsProject(t, id, tt.file)
			if tt.mangle != nil {
				tt.mangle(t, d, tt.file)
				d.Decrypt = mustIdentities(t, id).Decrypt
			} else {
				d.Decrypt = tt.decrypt
			}
			r, err := Render(sopsStack, d)
			fe := faultOf(t, err)
			if r != nil {
				t.Error("a failed render returned a result")
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
			if fe.Field != tt.field {
				t.Errorf("field %q, want %q", fe.Field, tt.field)
			}
			if !errors.Is(err, tt.reason) {
				t.Errorf("error does not wrap %v", tt.reason)
			}
			for _, plain := range []string{sopsPassword, sopsToken, sopsDBUser} {
				if strings.Contains(err.Error(), plain) {
					t.Errorf("error quotes plaintext %q: %v", plain, err)
				}
			}
		})
	}
}

func TestRenderWithholdsMessagesThatCouldQuoteDecryptedContent(t *testing.T) {
	id := sopsagetest.NewIdentity(t)
	const leak = "Leaky-Pa55-${oops"

	t.Run("encrypted compose file", func(t *testing.T) {
		d := sopsProject(t, id)
		compose := filepath.Join(d.Root, d.Path, "compose.yaml")
		src, _ := os.ReadFile(compose)
		src = []byte(strings.Replace(string(src), "GREETING: plain-greeting", "GREETING: "+leak, 1))
		if err := os.WriteFile(compose, src, 0o644); err != nil {
			t.Fatal(err)
		}
		// Plain, the loader quotes the bad value; that is how it should be.
		_, err := Render(sopsStack, d)
		if err == nil || !strings.Contains(err.Error(), "${oops") {
			t.Fatalf("plain render: %v; want the loader's message quoting the value", err)
		}
		// Only environment is encrypted: anything else would be refused.
		if err := os.WriteFile(compose, sopsagetest.EncryptMatching(t, compose, src, "^environment$", id.Recipient), 0o644); err != nil {
			t.Fatal(err)
		}
		_, err = Render(sopsStack, d)
		fe := faultOf(t, err)
		if strings.Contains(err.Error(), "Leaky") || strings.Contains(err.Error(), "oops") {
			t.Fatalf("error quotes decrypted content: %v", err)
		}
		if fe.File != "stack/compose.yaml" || !strings.Contains(err.Error(), "withheld") {
			t.Errorf("error %q: want the file named and the details withheld", err)
		}
		if fe.Field != "services.app.environment.GREETING" || fe.Line != lineOf(mustRead(t, compose), "services.app.environment.GREETING") || fe.Line == 0 {
			t.Errorf("field %q line %d: want the field and its line in the encrypted file", fe.Field, fe.Line)
		}
	})

	t.Run("decrypted variable in a plain compose file", func(t *testing.T) {
		d := sopsProject(t, id)
		write(t, d, "deploy.env", "DB_USER="+sopsDBUser+"\nIMAGE=Not A Valid Image Secret99\n")
		compose := filepath.Join(d.Root, d.Path, "compose.yaml")
		src, _ := os.ReadFile(compose)
		src = []byte(strings.Replace(string(src), "image: flotilla-test/app:1", "image: ${IMAGE}", 1))
		if err := os.WriteFile(compose, src, 0o644); err != nil {
			t.Fatal(err)
		}
		sopsEncryptFile(t, filepath.Join(d.Root, d.Path, "deploy.env"), id.Recipient)
		_, err := Render(sopsStack, d)
		fe := faultOf(t, err)
		if strings.Contains(err.Error(), "Secret99") || !strings.Contains(err.Error(), "***") {
			t.Fatalf("error %q: want the decrypted value redacted", err)
		}
		if fe.Field != "services.app.image" {
			t.Errorf("field %q", fe.Field)
		}
	})
}

func mustRead(t *testing.T, path string) []byte {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func TestRenderWarnsThatADecryptedConfigIsNotSecret(t *testing.T) {
	id := sopsagetest.NewIdentity(t)
	d := sopsProject(t, id, "app.conf")
	r := mustRender(t, sopsStack, d)
	if len(r.Warnings) != 1 || !strings.Contains(r.Warnings[0], "config app_conf is decrypted from stack/app.conf") {
		t.Errorf("warnings %q", r.Warnings)
	}
	// The manifest holds the config sealed; the deploy gets the plaintext.
	if strings.Contains(r.Manifest, `listen = ":8080"`) || !strings.Contains(r.Manifest, "sealed: "+sealPrefix) {
		t.Errorf("decrypted config data in the manifest, or not sealed:\n%s", r.Manifest)
	}
	st := mustConvert(t, r, sopsStack)
	if err := Unseal(st, r.Sealed); err != nil {
		t.Fatal(err)
	}
	for _, c := range st.Configs {
		if !strings.Contains(string(c.Data), `listen = ":8080"`) {
			t.Errorf("unsealed config data %q", c.Data)
		}
	}
}
