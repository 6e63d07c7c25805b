package imagewrite_test

import (
	"os"
	"path"
	"strings"
	"testing"

	"github.com/flotilla-gitops/flotilla/application"
	"github.com/flotilla-gitops/flotilla/imagepolicy"
	"github.com/flotilla-gitops/flotilla/imagewrite"
)

// examples/images stays true: its applications file is valid, and every
// field it marks is in the example repository, rewritable, and names its
// policy's image.
func TestTheImagesExample(t *testing.T) {
	text, err := os.ReadFile("../examples/images/applications.yaml")
	if err != nil {
		t.Fatal(err)
	}
	f, err := application.Parse("applications.yaml", text)
	if err != nil {
		t.Fatal(err)
	}
	a := f.Applications[0]
	marked := 0
	for _, ip := range a.ImageUpdates.Images {
		p, err := imagepolicy.Compile(ip)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range ip.Compose {
			data, err := os.ReadFile(path.Join("../examples/images", a.Source.Path, c.File))
			if err != nil {
				t.Fatal(err)
			}
			for _, s := range c.Services {
				fd, err := imagewrite.Find(data, []string{"services", s, "image"})
				if err != nil {
					t.Fatalf("%s: %v", s, err)
				}
				ref, err := imagepolicy.ParseRef(fd.Value, p.Image)
				if err != nil {
					t.Fatalf("%s: %v", s, err)
				}
				if p.Kind == imagepolicy.Digest && (ref.Tag != p.Tag || !strings.HasPrefix(ref.Digest, "sha256:")) {
					t.Errorf("%s: %s is not pinned to tag %s", s, fd.Value, p.Tag)
				}
				marked++
			}
		}
	}
	if marked != 4 {
		t.Fatalf("%d fields marked, want 4", marked)
	}
}
