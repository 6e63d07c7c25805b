package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
)

const renderFixture = "../../compose/testdata/stack"

func TestRenderPrintsManifestAndObjects(t *testing.T) {
	var out, errb bytes.Buffer
	code := runRender(context.Background(), renderOptions{
		Path:     renderFixture,
		Files:    []string{"compose.yaml", "compose.prod.yaml"},
		EnvFiles: []string{"app.env"},
		Stack:    "demo",
		Output:   "yaml",
	}, &out, &errb)
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	docs := yaml.NewDecoder(strings.NewReader(out.String()))
	var manifest, objects map[string]any
	if err := docs.Decode(&manifest); err != nil {
		t.Fatal(err)
	}
	if err := docs.Decode(&objects); err != nil {
		t.Fatal(err)
	}
	if manifest["kind"] != "flotilla.compose/v1" || manifest["stack"] != "demo" {
		t.Errorf("manifest head %v %v", manifest["kind"], manifest["stack"])
	}
	services, _ := objects["services"].(map[string]any)
	web, _ := services["demo_web"].(map[string]any)
	if web["Name"] != "demo_web" {
		t.Errorf("objects lack demo_web with its spec: %v", objects)
	}
	if strings.Contains(out.String(), "s3cr3t-Pl41nt3xt-value") {
		t.Error("secret plaintext printed")
	}
}

func TestRenderPrintsJSON(t *testing.T) {
	var out, errb bytes.Buffer
	code := runRender(context.Background(), renderOptions{
		Path: renderFixture, Files: []string{"compose.yaml"}, EnvFiles: []string{"app.env"}, Stack: "demo", Output: "json",
	}, &out, &errb)
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	_, js, ok := strings.Cut(out.String(), "\n{")
	if !ok {
		t.Fatalf("no JSON object after the manifest:\n%s", out.String())
	}
	var v map[string]any
	if err := json.Unmarshal([]byte("{"+js), &v); err != nil {
		t.Fatal(err)
	}
	if _, ok := v["secrets"]; !ok {
		t.Error("secret names missing")
	}
}

func TestRenderExitCodes(t *testing.T) {
	bad := t.TempDir()
	if err := os.WriteFile(filepath.Join(bad, "compose.yaml"), []byte("services:\n  web:\n    image: nginx\n    colour: blue\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		opts renderOptions
		code int
		msg  string
	}{
		{"invalid project", renderOptions{Path: bad, Stack: "x", Output: "yaml"}, exitFailed, "compose.yaml:4: field services.web.colour"},
		{"bad output", renderOptions{Path: bad, Output: "xml"}, exitMisuse, "--output"},
		{"path outside root", renderOptions{Path: bad, Root: renderFixture, Output: "yaml"}, exitMisuse, "inside --root"},
		{"default stack name from the path", renderOptions{Path: renderFixture, EnvFiles: []string{"app.env"}, Output: "yaml"}, exitOK, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var out, errb bytes.Buffer
			if code := runRender(context.Background(), c.opts, &out, &errb); code != c.code {
				t.Fatalf("exit %d, want %d: %s", code, c.code, errb.String())
			}
			if !strings.Contains(errb.String(), c.msg) {
				t.Errorf("stderr %q does not mention %q", errb.String(), c.msg)
			}
		})
	}
}

func TestRenderCommandIsRegistered(t *testing.T) {
	execute := func(args ...string) (int, string) {
		var out bytes.Buffer
		root := newRootCmd()
		root.SetArgs(args)
		root.SetOut(&out)
		root.SetErr(&out)
		return exitCodeOf(root.Execute()), out.String()
	}
	code, out := execute("render", "--path", renderFixture, "--env-file", "app.env", "--stack", "demo", "-o", "json")
	if code != exitOK || !strings.Contains(out, "demo_web") {
		t.Fatalf("exit %d:\n%s", code, out)
	}
	if code, _ := execute("render", "--bogus"); code != exitMisuse {
		t.Fatalf("unknown flag: exit %d", code)
	}
}
