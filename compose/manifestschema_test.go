package compose

import (
	"testing"

	"github.com/docker/cli/cli/compose/schema"
	"gopkg.in/yaml.v3"
)

// schemaErr validates a manifest's compose section against the compose
// schema, as a load of a manifest the process has not seen does. A render
// skips that validation for its own manifest (see project.render), which
// is sound only while this returns nil for every manifest a render gives.
func schemaErr(t *testing.T, manifest string) error {
	t.Helper()
	_, _, dict, err := manifestCompose(manifest)
	if err != nil {
		t.Fatal(err)
	}
	return schema.Validate(dict, schema.Version(dict))
}

// Every manifest rendered from the compatibility corpus passes the schema
// its conversion no longer checks.
func TestRenderedManifestsPassTheComposeSchema(t *testing.T) {
	for name, manifest := range corpusManifests(t) {
		if err := schemaErr(t, manifest); err != nil {
			t.Errorf("%s: the rendered manifest fails the compose schema: %v\n%s", name, err, manifest)
		}
	}
}

// A manifest that fails the schema is caught by schemaErr, so the test
// above can fail.
func TestSchemaErrRefusesAManifestTheSchemaRefuses(t *testing.T) {
	d := Dir{Root: t.TempDir()}
	write(t, d, "docker-compose.yml", "version: \"3.8\"\nservices:\n  web:\n    image: example/app:1\n")
	r := mustRender(t, "bad", d)
	var m map[string]any
	if err := yaml.Unmarshal([]byte(r.Manifest), &m); err != nil {
		t.Fatal(err)
	}
	m["compose"].(map[string]any)["services"].(map[string]any)["web"].(map[string]any)["replicas_typo"] = 1
	out, err := yaml.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	if err := schemaErr(t, string(out)); err == nil {
		t.Fatal("a service with an unknown field passed the schema")
	}
}
