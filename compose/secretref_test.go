package compose

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const refStack = "refdemo"

// refProject writes a compose project whose secrets come from a store,
// beside one from a file.
func refProject(t *testing.T, compose string) Dir {
	t.Helper()
	root := t.TempDir()
	for name, body := range map[string]string{"docker-compose.yml": compose, "plain.txt": "file-secret\n"} {
		if err := os.WriteFile(filepath.Join(root, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return Dir{Root: root, SealKey: []byte("test seal key")}
}

const refCompose = `version: "3.8"
services:
  api:
    image: flotilla-test/app:1
    secrets: [db_password]
  web:
    image: flotilla-test/app:1
    secrets: [plain]
secrets:
  db_password:
    x-flotilla:
      secretRef: {store: vault, path: kv/data/shop/db, key: password}
  plain:
    file: ./plain.txt
`

// fixedRefs answers every reference with values[ref.String()] and counts
// the questions.
type fixedRefs struct {
	values map[string]string
	asked  []string
}

func (f *fixedRefs) resolve(secret string, ref SecretRef) ([]byte, string, error) {
	f.asked = append(f.asked, secret+"="+ref.String())
	v, ok := f.values[ref.String()]
	if !ok {
		return nil, "", fmt.Errorf("no value for %s", ref)
	}
	return []byte(v), "tag-of-" + v, nil
}

func TestRenderTakesASecretRefFromTheStoreAndRecordsNoValue(t *testing.T) {
	const value = "store-pw-3f9a-plaintext"
	d := refProject(t, refCompose)
	refs := &fixedRefs{values: map[string]string{"vault:kv/data/shop/db#password": value}}
	d.SecretRef = refs.resolve
	r, err := Render(refStack, d)
	if err != nil {
		t.Fatal(err)
	}
	if len(refs.asked) != 1 || refs.asked[0] != "db_password=vault:kv/data/shop/db#password" {
		t.Fatalf("asked %q", refs.asked)
	}
	if len(r.Refs) != 1 || r.Refs[0].Secret != "db_password" || r.Refs[0].Ref.Path != "kv/data/shop/db" {
		t.Fatalf("refs %+v", r.Refs)
	}
	name := r.Refs[0].Name
	if !strings.HasPrefix(name, refStack+"_db_password-") || string(r.Secrets[name]) != value {
		t.Fatalf("secret %s = %q in %v", name, r.Secrets[name], r.Secrets)
	}
	if strings.Contains(r.Manifest, value) || strings.Contains(r.Manifest, "x-flotilla") {
		t.Fatalf("manifest holds the value or the extension:\n%s", r.Manifest)
	}
	if !strings.Contains(r.Manifest, "from: vault:kv/data/shop/db#password") || !strings.Contains(r.Manifest, "storeTag:") {
		t.Fatalf("manifest does not name the reference and its tag's digest:\n%s", r.Manifest)
	}
	// Neither the name nor the manifest holds a digest of the value
	// itself, under any key a reader could know.
	for _, d := range []string{digest([]byte(value)), (&project{}).keyedDigest("name", value), (&project{}).keyedDigest("secret", value)} {
		if strings.Contains(r.Manifest, d[:hashLen]) || strings.Contains(name, d[:hashLen]) {
			t.Fatalf("a digest of the value (%s) is in the name %s or the manifest:\n%s", d[:hashLen], name, r.Manifest)
		}
	}

	// The same files with a rotated value: asked again (no memo), a new
	// name for db_password, and the file secret untouched.
	refs.values["vault:kv/data/shop/db#password"] = value + "-2"
	r2, err := Render(refStack, d)
	if err != nil {
		t.Fatal(err)
	}
	if len(refs.asked) != 2 {
		t.Fatalf("the second render asked %d times in all, want 2: a render that used a store must not be memoised", len(refs.asked))
	}
	if r2.Refs[0].Name == name {
		t.Fatal("a rotated value kept its swarm secret's name")
	}
	st1, st2 := mustConvert(t, r, refStack), mustConvert(t, r2, refStack)
	if a, b := st1.Services[refStack+"_web"].TaskTemplate.ContainerSpec.Secrets[0].SecretName, st2.Services[refStack+"_web"].TaskTemplate.ContainerSpec.Secrets[0].SecretName; a != b {
		t.Fatalf("the file secret changed name: %s → %s", a, b)
	}
	if st2.Services[refStack+"_api"].TaskTemplate.ContainerSpec.Secrets[0].SecretName != r2.Refs[0].Name {
		t.Fatal("api does not mount the rotated secret")
	}
}

func TestRenderRefusesBadSecretRefs(t *testing.T) {
	ok := func(string, SecretRef) ([]byte, string, error) { return []byte("v"), "t", nil }
	for _, tc := range []struct {
		name, secret string
		fn           SecretRefFunc
		want         string
	}{
		{"no store", "x-flotilla:\n      secretRef: {store: vault, path: kv/data/a, key: k}", nil, "no secret store is granted"},
		{"missing path", "x-flotilla:\n      secretRef: {store: vault, key: k}", ok, "path required"},
		{"unknown field", "x-flotilla:\n      secretRef: {store: vault, path: kv/data/a, key: k, version: 3}", ok, "secretRef.version: unknown field"},
		{"with a file", "file: ./plain.txt\n    x-flotilla:\n      secretRef: {store: vault, path: kv/data/a, key: k}", ok, "not both"},
		{"with a name", "name: fixed\n    x-flotilla:\n      secretRef: {store: vault, path: kv/data/a, key: k}", ok, "leave name: out"},
		{"store error", "x-flotilla:\n      secretRef: {store: vault, path: kv/data/a, key: k}",
			func(string, SecretRef) ([]byte, string, error) { return nil, "", errors.New("store said no") }, "store said no"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := refProject(t, "version: \"3.8\"\nservices:\n  api:\n    image: flotilla-test/app:1\n    secrets: [s]\nsecrets:\n  s:\n    "+tc.secret+"\n")
			d.SecretRef = tc.fn
			_, err := Render(refStack, d)
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "secrets.s") {
				t.Fatalf("err %v, want one naming secrets.s and %q", err, tc.want)
			}
		})
	}
}

// A reference without a key asks the store for the whole entry: the store,
// not the renderer, decides whether it has one (AWS Secrets Manager does,
// Vault refuses).
func TestRenderPassesAReferenceWithoutAKeyToTheStore(t *testing.T) {
	d := refProject(t, "version: \"3.8\"\nservices:\n  api:\n    image: flotilla-test/app:1\n    secrets: [s]\nsecrets:\n  s:\n    x-flotilla:\n      secretRef: {store: aws, path: shop/api-token}\n")
	refs := &fixedRefs{values: map[string]string{"aws:shop/api-token#": "whole-value"}}
	d.SecretRef = refs.resolve
	r, err := Render(refStack, d)
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Refs) != 1 || r.Refs[0].Ref != (SecretRef{Store: "aws", Path: "shop/api-token"}) || len(refs.asked) != 1 {
		t.Fatalf("refs %+v, asked %v", r.Refs, refs.asked)
	}
}

// A value the store gave is redacted from any later fault of the render.
func TestRenderRedactsAStoreValueFromFaults(t *testing.T) {
	const value = "store-leak-77c1-plaintext"
	d := refProject(t, `version: "3.8"
services:
  api:
    image: flotilla-test/app:1
    secrets: [a, b]
secrets:
  a:
    x-flotilla:
      secretRef: {store: vault, path: kv/data/a, key: k}
  b:
    x-flotilla:
      secretRef: {store: vault, path: kv/data/b, key: k}
`)
	d.SecretRef = func(secret string, ref SecretRef) ([]byte, string, error) {
		if secret == "a" {
			return []byte(value), "t", nil
		}
		return nil, "", fmt.Errorf("a message that quotes %s", value)
	}
	_, err := Render(refStack, d)
	if err == nil || strings.Contains(err.Error(), value) {
		t.Fatalf("err %v: want a failure without the value", err)
	}
}
