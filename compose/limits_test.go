package compose

import (
	"errors"
	"strings"
	"testing"

	"github.com/flotilla-gitops/flotilla/sopsage/sopsagetest"
)

func TestRenderRefusesAFileOverTheSizeLimitNamingFileAndField(t *testing.T) {
	for _, tc := range []struct {
		name, file, field string
		limits            Limits
		grow              string // the file made large
	}{
		{"compose file", "stack/compose.yaml", "source.compose.files", Limits{MaxFileBytes: 2048}, "compose.yaml"},
		// The fault is against the compose file that names the file.
		{"config file", "stack/compose.yaml", "configs.app_conf.file", Limits{MaxFileBytes: 2048}, "app.conf"},
		{"env_file", "stack/compose.yaml", "services.app.env_file", Limits{MaxFileBytes: 2048}, "app.env"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := sopsProject(t, sopsagetestIdentity(t))
			d.Limits = tc.limits
			data := string(mustRead(t, d.Root+"/"+d.Path+"/"+tc.grow))
			pad := "\n# " + strings.Repeat("x", 4096) + "\n"
			write(t, d, tc.grow, data+pad)
			_, err := Render(sopsStack, d)
			fe := faultOf(t, err)
			if !errors.Is(err, ErrTooLarge) || fe.File != tc.file || fe.Field != tc.field {
				t.Fatalf("error %v: want ErrTooLarge naming file %s, field %s (got %q, %q)", err, tc.file, tc.field, fe.File, fe.Field)
			}
			if !strings.Contains(err.Error(), "maxFileBytes") || !strings.Contains(err.Error(), "stack/"+tc.grow) {
				t.Errorf("error %q does not name the limit", err)
			}
		})
	}
}

func TestRenderRefusesAManifestOverTheLimit(t *testing.T) {
	d := sopsProject(t, sopsagetestIdentity(t))
	d.Limits = Limits{MaxManifestBytes: 256}
	_, err := Render(sopsStack, d)
	fe := faultOf(t, err)
	if !errors.Is(err, ErrTooLarge) || fe.Field != "manifest" || fe.File != "stack/compose.yaml" {
		t.Fatalf("error %v: want ErrTooLarge naming the manifest", err)
	}
	// A negative limit turns it off; the default allows the project.
	d.Limits = Limits{MaxManifestBytes: -1, MaxFileBytes: -1}
	mustRender(t, sopsStack, d)
	d.Limits = Limits{}
	mustRender(t, sopsStack, d)
}

func sopsagetestIdentity(t *testing.T) sopsagetest.Identity { return sopsagetest.NewIdentity(t) }
