package compose

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

// memoProject writes a project that reads a file of every kind a render
// reads: two merged compose files, an interpolation env file, a service
// env_file, a config file and a secret file.
func memoProject(t *testing.T, root string) Dir {
	t.Helper()
	d := Dir{Root: root, Path: "app", Files: []string{"compose.yaml", "compose.prod.yaml"}, EnvFiles: []string{"vars.env"}}
	write(t, d, "compose.yaml", `services:
  web:
    image: example/web:${TAG}
    env_file: web.env
    configs: [conf]
    secrets: [token]
configs:
  conf: {file: ./app.conf}
secrets:
  token: {file: ./token}
`)
	write(t, d, "compose.prod.yaml", "services:\n  web:\n    deploy: {replicas: 2}\n")
	write(t, d, "vars.env", "TAG=1\n")
	write(t, d, "web.env", "MODE=prod\n")
	write(t, d, "app.conf", "listen 80\n")
	write(t, d, "token", "s3cret\n")
	return d
}

// fullRender renders d with the memo empty, as a first render does.
func fullRender(t *testing.T, stack string, d Dir) *Rendered {
	t.Helper()
	memo.renders.reset()
	r := mustRender(t, stack, d)
	memo.renders.reset()
	return r
}

// A render of files that read the same as an earlier render's — in another
// checkout, as the next commit gives — is answered from the memo and gives
// exactly what a full render gives.
func TestRender_unchangedFilesInANewCheckoutAreAnsweredFromTheMemo(t *testing.T) {
	want := fullRender(t, "memo", memoProject(t, t.TempDir()))
	mustRender(t, "memo", memoProject(t, t.TempDir()))
	hits := memo.renders.hits
	got := mustRender(t, "memo", memoProject(t, t.TempDir()))
	if memo.renders.hits != hits+1 {
		t.Fatalf("render of unchanged files was not answered from the memo")
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("memoised render differs from a full one:\n got %+v\nwant %+v", got, want)
	}
}

// A change to any file a render read, or a file appearing where the render
// looked for one, renders again, and gives what a full render gives.
func TestRender_aChangeToAnyFileItReadRendersAgain(t *testing.T) {
	for _, tc := range []struct {
		name, file, content string
		defaults            bool // render with the default compose file names
	}{
		{name: "compose file", file: "compose.yaml", content: "services:\n  web:\n    image: example/web:2\n"},
		{name: "merged compose file", file: "compose.prod.yaml", content: "services:\n  web:\n    deploy: {replicas: 3}\n"},
		{name: "interpolation env file", file: "vars.env", content: "TAG=2\n"},
		{name: "service env_file", file: "web.env", content: "MODE=staging\n"},
		{name: "config file", file: "app.conf", content: "listen 81\n"},
		{name: "secret file", file: "token", content: "other\n"},
		{name: "a default file of higher precedence", file: "compose.yaml", content: "services:\n  api:\n    image: example/api:1\n", defaults: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := memoProject(t, t.TempDir())
			if tc.defaults {
				d.Files = nil
				if err := os.Rename(filepath.Join(d.Root, "app", "compose.yaml"), filepath.Join(d.Root, "app", "docker-compose.yml")); err != nil {
					t.Fatal(err)
				}
			}
			memo.renders.reset()
			before := mustRender(t, "memo", d)
			write(t, d, tc.file, tc.content)
			got := mustRender(t, "memo", d)
			if memo.renders.hits != 0 {
				t.Fatalf("a changed %s was answered from the memo", tc.name)
			}
			if want := fullRender(t, "memo", d); !reflect.DeepEqual(got, want) {
				t.Errorf("render after the change differs from a full one:\n got %+v\nwant %+v", got, want)
			}
			if got.Manifest == before.Manifest {
				t.Errorf("the changed %s did not change the manifest", tc.name)
			}
		})
	}
}

func firstKey[V any](m map[string]V) string {
	for k := range m {
		return k
	}
	return ""
}

// Another option (the stack, the limits, the API version checked against)
// is another render, never the memo's answer for the first.
func TestRender_otherOptionsAreOtherRenders(t *testing.T) {
	memo.renders.reset()
	d := memoProject(t, t.TempDir())
	mustRender(t, "memo", d)
	other := d
	other.APIVersion = "1.30"
	for _, tc := range []struct {
		stack string
		d     Dir
	}{{"memo2", d}, {"memo", other}, {"memo", Dir{Root: d.Root, Path: d.Path, Files: d.Files, EnvFiles: d.EnvFiles, Limits: Limits{MaxFileBytes: 1 << 10}}}} {
		got := mustRender(t, tc.stack, tc.d)
		if memo.renders.hits != 0 {
			t.Fatalf("render for %s %+v answered from the memo", tc.stack, tc.d)
		}
		if want := fullRender(t, tc.stack, tc.d); !reflect.DeepEqual(got, want) {
			t.Errorf("render for %s differs from a full one", tc.stack)
		}
		memo.renders.reset()
		mustRender(t, "memo", d)
	}
}

// A render that decrypted a file is never kept: what it gives depends on
// key material no option names, and its plaintext stays with its caller.
func TestRender_aRenderThatDecryptedIsNotKept(t *testing.T) {
	memo.renders.reset()
	d := memoProject(t, t.TempDir())
	d.Decrypt = func(file string, data []byte) ([]byte, error) {
		if file == "app/token" {
			return []byte("decrypted\n"), nil
		}
		return data, nil
	}
	first := mustRender(t, "memo", d)
	second := mustRender(t, "memo", d)
	if memo.renders.hits != 0 || len(memo.renders.m) != 0 {
		t.Fatalf("a render that decrypted was kept (%d hits, %d entries)", memo.renders.hits, len(memo.renders.m))
	}
	if string(first.Secrets[firstKey(first.Secrets)]) != "decrypted\n" || !reflect.DeepEqual(first, second) {
		t.Errorf("decrypted renders differ: %q, %q", first.Secrets, second.Secrets)
	}
}

// What Render returns is the caller's: changing it changes nothing a later
// render gives.
func TestRender_resultIsTheCallersToChange(t *testing.T) {
	d := memoProject(t, t.TempDir())
	want := fullRender(t, "memo", d)
	for range 2 { // the render that fills the memo, and one it answers
		r := mustRender(t, "memo", d)
		for k := range r.Secrets {
			r.Secrets[k][0] = 'X'
		}
		r.Warnings = append(r.Warnings, "changed")
		r.Manifest = "changed"
	}
	if got := mustRender(t, "memo", d); !reflect.DeepEqual(got, want) {
		t.Errorf("a change to one render's result reached the next:\n got %+v\nwant %+v", got, want)
	}
}
