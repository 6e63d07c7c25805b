package application

import (
	"testing"
)

// previewStoresFile has a keyed project whose name glob and store grant a
// pull request's preview would match by name if names decided.
const previewStoresFile = `apiVersion: flotilla/v1
projects:
  - name: shop
    applications: [shop-*]
    sourceRepos: ["https://github.com/shop/*"]
    sops: {ageKeyFile: /run/secrets/shop-age-key}
secretStores:
  - name: vault
    vault:
      address: https://vault.internal:8200
      mount: kv
      auth: {tokenFile: /run/secrets/vault-token}
    grants:
      - projects: [shop]
        paths: [kv/data/shop/*]
      - applications: ["*"]
        paths: [kv/data/common/*]
applicationSets:
  - name: previews
    generators:
      - pullRequest: {repoURL: "https://github.com/shop/web.git"}
    template:
      name: "shop-pr-{{.number}}"
      source: {repoURL: "https://github.com/shop/web.git", revision: "{{.sha}}"}
applications:
  - name: shop-api
    source: {repoURL: https://github.com/shop/api.git}
`

// preview is the application the set's expansion makes of one pull
// request (what appset.Fill and the expander give, without a forge).
func preview(f *File, name string) Application {
	a := f.ApplicationSets[0].Template
	a.Name = name
	a.Source.Revision = "0123456789abcdef0123456789abcdef01234567"
	a.Allow = Allow{}
	a.SOPS = nil
	if pv := f.ApplicationSets[0].Preview; pv != nil {
		a.Allow, a.SOPS = pv.Allow, pv.SOPS
	}
	a.Generated = &Generated{Set: f.ApplicationSets[0].Name, Prune: true, Preview: true, Index: 0}
	return a
}

// A pull request chooses a preview's code and, through the template, its
// name: neither the project it falls in by name nor a grant by name or
// project may hand it the team's key or store entries, since its code could
// mount them and send them anywhere. Only the set's preview block grants.
func TestAPreviewGetsOnlyTheKeyAndStoreEntriesItsSetGrants(t *testing.T) {
	f, err := Parse("apps.yaml", []byte(previewStoresFile))
	if err != nil {
		t.Fatal(err)
	}
	out, err := f.Expanded([]Application{preview(f, "shop-pr-7")})
	if err != nil {
		t.Fatal(err)
	}
	static, pr := out.Applications[0], out.Applications[1]
	if k, _ := static.SOPSKey(); k == nil || len(static.SecretStores) != 1 || len(static.SecretStores[0].Paths) != 2 {
		t.Fatalf("shop-api, a member, has key %+v and grants %+v; want the project's key and both grants", k, static.SecretStores)
	}
	if pr.Project == nil || pr.Project.Name != "shop" {
		t.Fatalf("the preview is not held to its project's terms: %+v", pr.Project)
	}
	if k, _ := pr.SOPSKey(); k != nil || pr.DecryptsWithControllerKey() {
		t.Errorf("the preview decrypts with %+v (controller's key: %v), want no key at all", k, pr.DecryptsWithControllerKey())
	}
	if len(pr.SecretStores) != 0 {
		t.Errorf("the preview is granted %+v by its name and project, want nothing", pr.SecretStores)
	}

	f.ApplicationSets[0].Preview = &Preview{
		SOPS:         &SOPS{AgeKeyFile: "/run/secrets/preview-age-key"},
		SecretStores: []PreviewStoreGrant{{Store: "vault", Paths: []string{"kv/data/preview/*"}}},
	}
	out, err = f.Expanded([]Application{preview(f, "shop-pr-7")})
	if err != nil {
		t.Fatal(err)
	}
	pr = out.Applications[1]
	if k, _ := pr.SOPSKey(); k == nil || k.AgeKeyFile != "/run/secrets/preview-age-key" {
		t.Errorf("the preview's key is %+v, want the set's preview.sops", k)
	}
	if g := pr.SecretStores; len(g) != 1 || g[0].Store.Name != "vault" || !g[0].MayRead("kv/data/preview/db") || g[0].MayRead("kv/data/shop/db") || g[0].MayRead("kv/data/common/db") {
		t.Errorf("the preview's grants are %+v, want kv/data/preview/* of vault only", g)
	}
}

func TestAPreviewSetsSecretGrantsAreValidated(t *testing.T) {
	_, err := Parse("apps.yaml", []byte(`apiVersion: flotilla/v1
secretStores:
  - name: vault
    vault:
      address: https://vault.internal:8200
      mount: kv
      auth: {tokenFile: /run/secrets/vault-token}
    grants:
      - applications: [web]
        paths: [kv/data/web/*]
applicationSets:
  - name: previews
    preview:
      sops: {ageKeyFile: keys/preview}
      secretStores:
        - {store: vault, paths: [other/data/x/*]}
        - {store: nowhere, paths: [kv/data/x/*]}
        - {store: vault}
    generators:
      - pullRequest: {repoURL: "https://github.com/shop/web.git"}
    template:
      name: "pr-{{.number}}"
      source: {repoURL: "https://github.com/shop/web.git", revision: "{{.sha}}"}
      sops: {ageKeyFile: /run/secrets/shop-age-key}
`))
	checkProblems(t, err, []want{
		{line: 14, field: "applicationSets[0].preview.sops.ageKeyFile", kind: ErrInvalid, msg: "absolute path"},
		{line: 16, field: "applicationSets[0].preview.secretStores[0].paths[0]", kind: ErrInvalid, msg: "not under the store's mount"},
		{line: 17, field: "applicationSets[0].preview.secretStores[1].store", kind: ErrInvalid, msg: `no store "nowhere"`},
		{line: 18, field: "applicationSets[0].preview.secretStores[2].paths", kind: ErrRequired, msg: "globs of the entry paths"},
		{line: 24, field: "applicationSets[0].template.sops", kind: ErrInvalid, msg: "preview.sops"},
	})
}
