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

// sealedEnvOf is the app service's env as converted from the manifest
// alone: what a release record shows.
func sealedEnvOf(t *testing.T, r *Rendered) []string {
	t.Helper()
	return mustConvert(t, r, sopsStack).Services[sopsStack+"_app"].TaskTemplate.ContainerSpec.Env
}

func envValue(env []string, key string) string {
	for _, e := range env {
		if k, v, _ := strings.Cut(e, "="); k == key {
			return v
		}
	}
	return ""
}

func TestRenderSealsEnvValuesOfAnEncryptedEnvFileWithAKeyedDigest(t *testing.T) {
	id := sopsagetest.NewIdentity(t)
	d := sopsProject(t, id, "app.env")
	r := mustRender(t, sopsStack, d)
	if strings.Contains(r.Manifest, sopsToken) {
		t.Fatalf("env_file plaintext in the manifest:\n%s", r.Manifest)
	}
	ph := envValue(sealedEnvOf(t, r), "API_TOKEN")
	if !IsSealed(ph) || r.Sealed[ph] != sopsToken {
		t.Fatalf("API_TOKEN is %q in the manifest, sealed %v", ph, r.Sealed)
	}
	if env := serviceEnv(t, r); !slices.Contains(env, "API_TOKEN="+sopsToken) || !slices.Contains(env, "GREETING=plain-greeting") {
		t.Fatalf("unsealed env %q", env)
	}
	if got := SealedEnv(sealedEnvOf(t, r)); !got["API_TOKEN"] || got["GREETING"] {
		t.Errorf("SealedEnv %v: want API_TOKEN and not GREETING", got)
	}

	// The same value under another key gives another digest: the digest is
	// keyed, not a plain hash of the value.
	other := d
	other.SealKey = []byte("another key")
	if ph2 := envValue(sealedEnvOf(t, mustRender(t, sopsStack, other)), "API_TOKEN"); ph2 == ph || !IsSealed(ph2) {
		t.Errorf("placeholder %q under another key, %q under the first", ph2, ph)
	}

	// A changed value changes the placeholder, so the plan sees an upgrade.
	write(t, d, "app.env", "API_TOKEN="+sopsToken+"-2\nLOG_LEVEL=info\n")
	sopsEncryptFile(t, filepath.Join(d.Root, d.Path, "app.env"), id.Recipient)
	changed := mustRender(t, sopsStack, d)
	if changed.Manifest == r.Manifest {
		t.Fatal("a changed encrypted env value left the manifest unchanged")
	}
}

func TestRenderSealsTheEncryptedEnvironmentEntriesOfAComposeFile(t *testing.T) {
	id := sopsagetest.NewIdentity(t)
	for _, tc := range []struct {
		name, regex, src string
		sealed, plain    []string // KEY=value
	}{
		{"map entries", "^DB_PASSWORD$", `version: "3.8"
services:
  app:
    image: flotilla-test/app:1
    environment:
      DB_PASSWORD: compose-pw-77c1
      GREETING: plain-greeting
`, []string{"DB_PASSWORD=compose-pw-77c1"}, []string{"GREETING=plain-greeting"}},
		{"list entries", "^environment$", `version: "3.8"
services:
  app:
    image: flotilla-test/app:1
    environment:
      - LIST_PASSWORD=list-pw-19ad
    labels:
      - team=plain
`, []string{"LIST_PASSWORD=list-pw-19ad"}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := sopsProject(t, id)
			d.EnvFiles = nil
			path := filepath.Join(d.Root, d.Path, "compose.yaml")
			if err := os.WriteFile(path, sopsagetest.EncryptMatching(t, path, []byte(tc.src), tc.regex, id.Recipient), 0o644); err != nil {
				t.Fatal(err)
			}
			r := mustRender(t, sopsStack, d)
			if len(r.Warnings) != 0 {
				t.Errorf("warnings %q: only environment values were encrypted", r.Warnings)
			}
			sealed := SealedEnv(sealedEnvOf(t, r))
			env := serviceEnv(t, r)
			for _, kv := range tc.sealed {
				k, v, _ := strings.Cut(kv, "=")
				if strings.Contains(r.Manifest, v) || !sealed[k] {
					t.Errorf("encrypted %s is not sealed in the manifest:\n%s", k, r.Manifest)
				}
				if !slices.Contains(env, kv) {
					t.Errorf("unsealed env %q lacks %s", env, kv)
				}
			}
			for _, kv := range tc.plain {
				k, _, _ := strings.Cut(kv, "=")
				if sealed[k] || !slices.Contains(env, kv) {
					t.Errorf("plain %s sealed or missing: %q", kv, env)
				}
			}
		})
	}
}

func TestRenderRefusesADecryptedValueThatWouldLandOutsideEnvironment(t *testing.T) {
	id := sopsagetest.NewIdentity(t)
	d := sopsProject(t, id, "deploy.env")
	compose := filepath.Join(d.Root, d.Path, "compose.yaml")
	src := strings.Replace(string(mustRead(t, compose)), "image: flotilla-test/app:1", "image: flotilla-test/app:1\n    command: [\"--user=${DB_USER}\"]", 1)
	if err := os.WriteFile(compose, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := Render(sopsStack, d)
	fe := faultOf(t, err)
	if fe.Field != "services.app.command" || fe.File != "stack/compose.yaml" {
		t.Errorf("fault names file %q field %q", fe.File, fe.Field)
	}
	if strings.Contains(err.Error(), sopsDBUser) || !strings.Contains(err.Error(), "DB_USER") {
		t.Errorf("error %q quotes the decrypted value or does not name its variable", err)
	}
}

func TestUnsealRefusesAPlaceholderWithoutItsValue(t *testing.T) {
	id := sopsagetest.NewIdentity(t)
	r := mustRender(t, sopsStack, sopsProject(t, id, "app.env", "app.conf"))
	st := mustConvert(t, r, sopsStack)
	if err := Unseal(st, nil); !errors.Is(err, ErrSealedMissing) {
		t.Fatalf("Unseal without values: %v, want ErrSealedMissing", err)
	}
	if got := SealedValues(r.Manifest); len(got) != len(r.Sealed) {
		t.Errorf("SealedValues %v, Rendered.Sealed has %d", got, len(r.Sealed))
	}
}

func TestRenderNamesADecryptedSecretByAKeyedDigestThatSurvivesReencryption(t *testing.T) {
	id := sopsagetest.NewIdentity(t)
	ids, err := sopsage.ParseIdentities(id.File)
	if err != nil {
		t.Fatal(err)
	}
	d := sopsProject(t, id, "db_password.txt")
	first := mustRender(t, sopsStack, d)
	plainName, _ := hashedName(sopsStack, "db_password", []byte(sopsPassword))
	if _, ok := first.Secrets[plainName]; ok {
		t.Fatalf("decrypted secret named by the plain hash of its content: %s", plainName)
	}
	// The key comes from the identities, not the file: encrypting the same
	// plaintext again names it the same.
	write(t, d, "db_password.txt", sopsPassword)
	sopsEncryptFile(t, filepath.Join(d.Root, d.Path, "db_password.txt"), id.Recipient)
	if ids.SealKey() == nil {
		t.Fatal("no seal key")
	}
	if again := mustRender(t, sopsStack, d); again.Manifest != first.Manifest {
		t.Error("re-encrypting the secret's plaintext changed the manifest")
	}
}

func TestRenderRefusesAPlaceholderWrittenIntoTheRepository(t *testing.T) {
	id := sopsagetest.NewIdentity(t)
	d := sopsProject(t, id, "app.env")
	r := mustRender(t, sopsStack, d)
	ph := envValue(sealedEnvOf(t, r), "API_TOKEN")
	// Copying API_TOKEN's placeholder into another variable must not have
	// the render fill it in with the token.
	compose := filepath.Join(d.Root, d.Path, "compose.yaml")
	src := strings.Replace(string(mustRead(t, compose)), "GREETING: plain-greeting", "GREETING: "+ph, 1)
	if err := os.WriteFile(compose, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := Render(sopsStack, d)
	if fe := faultOf(t, err); fe.Field != "services.app.environment.GREETING" {
		t.Fatalf("fault %v: want it against services.app.environment.GREETING", err)
	}
	// And as a config's whole content.
	d = sopsProject(t, id, "app.env")
	write(t, d, "app.conf", ph)
	if _, err := Render(sopsStack, d); faultOf(t, err).Field != "configs.app_conf.file" {
		t.Fatalf("config holding a placeholder: %v", err)
	}
}

// Only environment values of an encrypted compose file are sealed; a value
// encrypted in any other field would be written into the manifest in
// plaintext, so the file is refused, naming the field and never the value.
func TestRenderRefusesAnEncryptedComposeValueOutsideEnvironment(t *testing.T) {
	id := sopsagetest.NewIdentity(t)
	for _, tc := range []struct{ name, regex, field, src string }{
		{"command", "^command$", "services.app.command", "    command: [\"--token=cmd-secret-4b1e\"]\n"},
		{"label", "^team$", "services.app.labels", "    labels: {team: label-secret-9f3a}\n"},
		{"image", "^image$", "services.app.image", ""},
		{"extension", "^x-token$", "x-token", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := sopsProject(t, id)
			d.EnvFiles = nil
			src := "version: \"3.8\"\nservices:\n  app:\n    image: flotilla-test/app:1\n" + tc.src
			if tc.name == "extension" {
				src += "x-token: ext-secret-22aa\n"
			}
			path := filepath.Join(d.Root, d.Path, "compose.yaml")
			if err := os.WriteFile(path, sopsagetest.EncryptMatching(t, path, []byte(src), tc.regex, id.Recipient), 0o644); err != nil {
				t.Fatal(err)
			}
			_, err := Render(sopsStack, d)
			fe := faultOf(t, err)
			if !errors.Is(err, ErrEncryptedOutsideEnvironment) || fe.Field != tc.field || fe.File != "stack/compose.yaml" {
				t.Fatalf("want ErrEncryptedOutsideEnvironment at stack/compose.yaml %s, got %v", tc.field, err)
			}
			if strings.Contains(err.Error(), "secret-") || strings.Contains(err.Error(), "flotilla-test") {
				t.Fatalf("error quotes a decrypted value: %v", err)
			}
		})
	}
}
