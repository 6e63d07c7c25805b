package renderbox

import (
	"context"
	"errors"
	"os"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/flotilla-gitops/flotilla/chartengine"
	"github.com/flotilla-gitops/flotilla/fault"
	"github.com/flotilla-gitops/flotilla/internal/chartfixture"
)

// TestMain lets the test binary serve as the render child.
func TestMain(m *testing.M) {
	Main()
	os.Exit(m.Run())
}

const exampleChart = "../examples/chart"

// chartRepo copies the example chart to <root>/chart with edits laid over
// it ("" deletes a file) and returns root.
func chartRepo(t testing.TB, edits map[string]string) string {
	t.Helper()
	inChart := make(map[string]string, len(edits))
	for name, content := range edits {
		inChart["chart/"+name] = content
	}
	return chartfixture.Copy(t, exampleChart, inChart)
}

func write(p, content string) error { return chartfixture.Write(p, content) }

func newBox(t testing.TB, l Limits) *Box {
	t.Helper()
	b, err := New(l)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func job(root string) Job {
	return Job{
		Chart: "shop",
		Dir: chartengine.Dir{
			Root: root, Path: "chart",
			Values:  map[string]any{"web": map[string]any{"replicas": 2, "message": "hi"}, "env": map[string]any{"A": "a"}, "extra": map[string]any{"A": nil, "B": 1.5, "C": true, "D": []any{1, "x"}}},
			Set:     map[string]any{"image.tag": "2"},
			SealKey: []byte("0123456789abcdef0123456789abcdef"),
		},
		Release: chartengine.Release{Name: "shop-eu", Revision: 3},
	}
}

// The child renders exactly what the controller would in process: the
// same manifest, secrets, warnings, metadata and values digest.
func TestRenderMatchesInProcess(t *testing.T) {
	root := chartRepo(t, nil)
	j := job(root)
	want, err := RenderInProcess(j)
	if err != nil {
		t.Fatal(err)
	}
	got, err := newBox(t, Limits{}).Render(context.Background(), j)
	if err != nil {
		t.Fatal(err)
	}
	if got.Manifest != want.Manifest {
		t.Errorf("manifest differs:\n%s\nwant:\n%s", got.Manifest, want.Manifest)
	}
	if !reflect.DeepEqual(got.Chart, want.Chart) || got.ValuesDigest != want.ValuesDigest || !reflect.DeepEqual(got.Warnings, want.Warnings) || len(got.Secrets) != len(want.Secrets) {
		t.Errorf("got %+v %s %v, want %+v %s %v", got.Chart, got.ValuesDigest, got.Warnings, want.Chart, want.ValuesDigest, want.Warnings)
	}
}

// A manifest that differs from the recorded one is rendered again as the
// next revision, in the same child.
func TestRenderNextRevision(t *testing.T) {
	root := chartRepo(t, map[string]string{"templates/rev.yaml": "x-rev: \"{{ .Release.Revision }}\"\n"})
	j := job(root)
	rec := "something else"
	j.Recorded = &rec
	got, err := newBox(t, Limits{}).Render(context.Background(), j)
	if err != nil {
		t.Fatal(err)
	}
	j.Release.Revision = 4
	j.Recorded = nil
	want, err := RenderInProcess(j)
	if err != nil {
		t.Fatal(err)
	}
	if got.Manifest != want.Manifest {
		t.Errorf("got\n%s\nwant revision 4's\n%s", got.Manifest, want.Manifest)
	}
}

// A refusal made in the child reads as it would in process: the same
// text, the file and line in a *fault.Error, and its sentinel.
func TestRenderRefusalCrosses(t *testing.T) {
	root := chartRepo(t, map[string]string{"templates/bad.yaml": "x: {{ .Values.nope.deeper }}\n"})
	j := job(root)
	_, want := RenderInProcess(j)
	if want == nil {
		t.Fatal("the in-process render passed")
	}
	_, err := newBox(t, Limits{}).Render(context.Background(), j)
	if err == nil || err.Error() != want.Error() {
		t.Fatalf("got %v, want %v", err, want)
	}
	var fe, wfe *fault.Error
	if !errors.As(err, &fe) || !errors.As(want, &wfe) || fe.File != wfe.File || fe.Line != wfe.Line {
		t.Errorf("fault %+v, want %+v", fe, wfe)
	}
	if !errors.Is(err, chartengine.ErrTemplate) {
		t.Errorf("%v does not wrap ErrTemplate", err)
	}
	if errors.Is(err, ErrLimit) {
		t.Errorf("a template's own error is reported as a limit: %v", err)
	}
}

// Decryption happens in the parent: the child asks for it.
func TestRenderDecryptsThroughParent(t *testing.T) {
	root := chartRepo(t, map[string]string{"values-secret.yaml": "web:\n  message: ENC\n"})
	j := job(root)
	j.Dir.ValueFiles = []string{"values-secret.yaml"}
	var asked []string
	j.Dir.Decrypt = func(file string, data []byte) ([]byte, error) {
		asked = append(asked, file)
		return data, nil
	}
	want, err := RenderInProcess(j)
	if err != nil {
		t.Fatal(err)
	}
	inProcess := asked
	asked = nil
	got, err := newBox(t, Limits{}).Render(context.Background(), j)
	if err != nil {
		t.Fatal(err)
	}
	if len(asked) == 0 || !reflect.DeepEqual(asked, inProcess) {
		t.Errorf("the child asked to decrypt %v, in process %v", asked, inProcess)
	}
	if got.Manifest != want.Manifest {
		t.Errorf("manifest differs:\n%s\nwant:\n%s", got.Manifest, want.Manifest)
	}
}

// nestedRange is the loop no in-process budget sees: ranges over a list
// built once, with a body that calls no function and writes nothing.
const nestedRange = `{{ $l := until 100000 }}{{ range $l }}{{ range $l }}{{ range $l }}{{ end }}{{ end }}{{ end }}`

// A render that never ends costs its deadline, then its process.
func TestRenderDeadline(t *testing.T) {
	root := chartRepo(t, map[string]string{"templates/loop.yaml": nestedRange})
	began := time.Now()
	_, err := newBox(t, Limits{Deadline: 2 * time.Second}).Render(context.Background(), job(root))
	if !errors.Is(err, ErrLimit) || !strings.Contains(err.Error(), " of 2s exceeded") || !strings.Contains(err.Error(), "chart shop") {
		// The deadline and the CPU limit are equal; either may come first.
		t.Fatalf("got %v, want the render deadline or CPU limit naming the chart", err)
	}
	if took := time.Since(began); took > 10*time.Second {
		t.Errorf("the refusal took %s", took)
	}
}

// A render that outgrows the child's memory kills the child only. The
// string doubles within the in-process budget (256 MiB built) but past
// the child's address space.
func TestRenderMemoryLimit(t *testing.T) {
	if raceEnabled {
		t.Skip("under the race detector an address-space limit fails in the detector's own allocator")
	}
	tmpl := `{{ $s := repeat 1048576 "x" }}{{ range until 7 }}{{ $s = cat $s $s }}{{ end }}{{ len $s }}`
	root := chartRepo(t, map[string]string{"templates/big.yaml": "# " + tmpl + "\n"})
	box := newBox(t, Limits{Memory: 96 << 20, Deadline: 20 * time.Second})
	// The limit leaves an ordinary render room: the control.
	if _, err := box.Render(context.Background(), job(chartRepo(t, nil))); err != nil {
		t.Fatalf("an ordinary render under the same limit: %v", err)
	}
	_, err := box.Render(context.Background(), job(root))
	if !errors.Is(err, ErrLimit) || !strings.Contains(err.Error(), "memory") || !strings.Contains(err.Error(), "chart shop") {
		t.Fatalf("got %v, want the memory limit naming the chart", err)
	}
}

// The parent reads no more than MaxOutput from the child.
func TestRenderOutputBound(t *testing.T) {
	root := chartRepo(t, nil)
	_, err := newBox(t, Limits{MaxOutput: 512}).Render(context.Background(), job(root))
	if !errors.Is(err, ErrLimit) || !strings.Contains(err.Error(), "output passed") {
		t.Fatalf("got %v, want the output bound", err)
	}
}

// A cancelled pass stops its child and says so, not as a limit.
func TestRenderCancelled(t *testing.T) {
	root := chartRepo(t, map[string]string{"templates/loop.yaml": nestedRange})
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(500*time.Millisecond, cancel)
	_, err := newBox(t, Limits{Deadline: 30 * time.Second}).Render(ctx, job(root))
	if err == nil || errors.Is(err, ErrLimit) || !errors.Is(err, context.Canceled) {
		t.Fatalf("got %v, want context.Canceled", err)
	}
}

// BenchmarkRender measures what isolation costs a render: the child's
// start, the pipes and gob, against the same render in process.
func BenchmarkRender(b *testing.B) {
	root := chartRepo(b, nil)
	j := job(root)
	b.Run("child", func(b *testing.B) {
		box := newBox(b, Limits{})
		for b.Loop() {
			if _, err := box.Render(context.Background(), j); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("in-process", func(b *testing.B) {
		for b.Loop() {
			if _, err := RenderInProcess(j); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// Time the parent spends working for the child (a decryption, a
// dependency fetch from a slow chart repository) is not the template's:
// the deadline does not count it.
func TestRenderDeadlineStopsWhileTheParentWorks(t *testing.T) {
	root := chartRepo(t, map[string]string{"values-secret.yaml": "web:\n  message: ENC\n"})
	j := job(root)
	j.Dir.ValueFiles = []string{"values-secret.yaml"}
	j.Dir.Decrypt = func(file string, data []byte) ([]byte, error) {
		time.Sleep(3 * time.Second)
		return data, nil
	}
	if _, err := newBox(t, Limits{Deadline: 2 * time.Second}).Render(context.Background(), j); err != nil {
		t.Fatalf("a slow decryption counted against the render deadline: %v", err)
	}
}
