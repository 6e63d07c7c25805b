package backend

import (
	"bytes"
	"compress/gzip"
	"reflect"
	"testing"

	"github.com/moby/moby/api/types/swarm"

	"github.com/flotilla-gitops/flotilla/charts"
	"github.com/flotilla-gitops/flotilla/labels"
)

func gzipped(t *testing.T, s string) []byte {
	t.Helper()
	var b bytes.Buffer
	zw := gzip.NewWriter(&b)
	if _, err := zw.Write([]byte(s)); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// Records written before they named the application set still load (with
// no set), and one that names it keeps it through encode and decode.
func TestARecordNamesItsApplicationSetAndAnOlderRecordWithoutOneStillLoads(t *testing.T) {
	old := swarm.Config{Spec: swarm.ConfigSpec{Annotations: swarm.Annotations{Name: "flotilla-release.shop.1",
		Labels: map[string]string{labels.RecordFormat: "1"}},
		Data: gzipped(t, `{"name":"shop","revision":1,"owner":"ctl/shop","manifest":"services: {}\n","time":"2026-11-01T00:00:00Z"}`)}}
	r, err := decodeRecord(old)
	if err != nil || r.Set != nil || r.Name != "shop" || r.Revision != 1 {
		t.Fatalf("old record: %+v, %v", r, err)
	}
	want := charts.SetRef{Name: "previews", Prune: true, Preview: true}
	data, err := encodeRecord(charts.Release{Name: "shop-pr-7", Revision: 2, Owner: "ctl/shop-pr-7", Set: &want})
	if err != nil {
		t.Fatal(err)
	}
	r, err = decodeRecord(swarm.Config{Spec: swarm.ConfigSpec{Annotations: swarm.Annotations{Name: "x"}, Data: data}})
	if err != nil || r.Set == nil || !reflect.DeepEqual(*r.Set, want) {
		t.Fatalf("record with a set decodes as %+v, %v", r.Set, err)
	}
}
