package compose

import (
	"errors"
	"strings"
	"testing"
)

// Every 3.x version `docker stack deploy` reads renders and converts with
// the shapes old public stack files use: short port and volume syntax, an
// external network under external.name, an external secret, and a config
// and secret read from a file. The manifest adds name: to those objects
// and the long syntax to ports and volumes, which the 3.0–3.4 schemas do
// not have.
func TestOldComposeVersionsWithExternalAndFileObjectsRender(t *testing.T) {
	for _, v := range []string{"3", "3.0", "3.1", "3.2", "3.3", "3.4", "3.5", "3.9"} {
		t.Run(v, func(t *testing.T) {
			d := Dir{Root: t.TempDir()}
			extras := ""
			if v != "3.0" {
				// secrets arrive in 3.1, configs in 3.3.
				extras += `
secrets:
  token:
    file: ./token.txt
  shared:
    external: true
`
			}
			svc := ""
			if v != "3.0" {
				svc = "\n    secrets: [token, shared]"
			}
			if v != "3.0" && v != "3.1" && v != "3.2" {
				extras += `
configs:
  app:
    file: ./app.conf
`
				svc += "\n    configs: [app]"
			}
			write(t, d, "docker-compose.yml", `version: "`+v+`"
services:
  web:
    image: nginx:1.25
    ports: ["8080:80", "9000"]
    volumes: ["/srv/data:/data:ro", "cache:/cache"]
    networks: [front]`+svc+`
networks:
  front:
    external:
      name: traefik-public
volumes:
  cache: {}
`+extras)
			write(t, d, "token.txt", "s3cret")
			write(t, d, "app.conf", "listen 80;")
			r := mustRender(t, "web", d)
			st := mustConvert(t, r, "web")
			if got := strings.Join(st.ExternalNetworks, ","); got != "traefik-public" {
				t.Errorf("external networks %q, want traefik-public", got)
			}
			spec := st.Services["web_web"]
			if n := len(spec.EndpointSpec.Ports); n != 2 {
				t.Errorf("%d ports, want 2", n)
			}
			if n := len(spec.TaskTemplate.ContainerSpec.Mounts); n != 2 {
				t.Errorf("%d mounts, want 2", n)
			}
			if v != "3.0" && len(st.Secrets) != 1 {
				t.Errorf("secrets %v, want the file-backed one", st.Secrets)
			}
		})
	}
}

// A file of 3.5 or later keeps its own version in the manifest, so the
// manifests of files that rendered before do not change.
func TestManifestKeepsAVersionThatHoldsItsShape(t *testing.T) {
	for in, want := range map[string]string{"3.0": "3.5", "3.4": "3.5", "3.5": "3.5", "3.8": "3.8", "3.10": "3.10", "3.13": "3.13"} {
		if got := manifestVersion(in); got != want {
			t.Errorf("manifestVersion(%s) = %s, want %s", in, got, want)
		}
	}
}

const startIntervalFile = `services:
  probe:
    image: nginx:1.25
    healthcheck:
      test: ["CMD", "true"]
      interval: 30s
      start_interval: 2s
    cap_add: [NET_ADMIN]
    deploy:
      replicas: 0
`

// A daemon older than the field loses it, so the spec Flotilla writes and
// compares must not carry it: ForAPIVersion drops exactly the fields the
// version lacks, names each one, and leaves a newer version's spec alone.
func TestForAPIVersionDropsWhatTheDaemonCannotKeep(t *testing.T) {
	d := Dir{Root: t.TempDir()}
	write(t, d, "compose.yaml", startIntervalFile)
	r := mustRender(t, "app", d)

	st := mustConvert(t, r, "app")
	shared := st.Services["app_probe"].TaskTemplate.ContainerSpec
	warns := st.ForAPIVersion("1.41")
	if len(warns) != 1 || !strings.Contains(warns[0], "healthcheck.start_interval") || !strings.Contains(warns[0], "1.44") {
		t.Errorf("warnings %q, want one naming healthcheck.start_interval and 1.44", warns)
	}
	cs := st.Services["app_probe"].TaskTemplate.ContainerSpec
	if cs.Healthcheck.StartInterval != 0 {
		t.Errorf("start interval %v kept for API 1.41", cs.Healthcheck.StartInterval)
	}
	if cs.Healthcheck.Interval == 0 || len(cs.CapabilityAdd) != 1 {
		t.Errorf("dropped more than the field: %+v", cs)
	}
	if shared.Healthcheck.StartInterval == 0 {
		t.Error("the spec the stack held before was changed in place")
	}

	newer := mustConvert(t, r, "app")
	if w := newer.ForAPIVersion("1.44"); len(w) != 0 {
		t.Errorf("API 1.44 warnings %q, want none", w)
	}
	if newer.Services["app_probe"].TaskTemplate.ContainerSpec.Healthcheck.StartInterval == 0 {
		t.Error("API 1.44 lost the start interval")
	}
	if w := mustConvert(t, r, "app").UnsupportedFields("1.40"); len(w) != 2 {
		t.Errorf("API 1.40 warnings %q, want start_interval and cap_add", w)
	}
}

// A render checked against an API version names what that version drops,
// and a render without one names nothing.
func TestRenderWarnsAboutFieldsTheAPIVersionDrops(t *testing.T) {
	d := Dir{Root: t.TempDir(), APIVersion: "1.41"}
	write(t, d, "compose.yaml", startIntervalFile)
	r := mustRender(t, "app", d)
	if len(r.Warnings) != 1 || !strings.Contains(r.Warnings[0], "service probe: healthcheck.start_interval") {
		t.Errorf("warnings %q, want service probe: healthcheck.start_interval", r.Warnings)
	}
	d.APIVersion = ""
	if r := mustRender(t, "app", d); len(r.Warnings) != 0 {
		t.Errorf("warnings without an API version: %q", r.Warnings)
	}
}

// Every name Swarm would refuse is refused at render, against the field
// that declared it, stack prefix included in the length.
func TestRenderRefusesNamesSwarmWouldRefuse(t *testing.T) {
	long := strings.Repeat("a", 300)
	for name, tt := range map[string]struct {
		file, field, words string
	}{
		"300-character service": {
			file:  "services:\n  " + long + ":\n    image: nginx\n",
			field: "services." + long, words: "Swarm allows 63",
		},
		"service prefix over 63": {
			file:  "services:\n  " + strings.Repeat("s", 60) + ":\n    image: nginx\n",
			field: "services." + strings.Repeat("s", 60), words: "the stack prefix included",
		},
		"dot in a service name": {
			file:  "services:\n  web.1:\n    image: nginx\n",
			field: "services.web.1", words: "not valid",
		},
		"long network": {
			file:  "services:\n  web:\n    image: nginx\n    networks: [n]\nnetworks:\n  n:\n    name: " + strings.Repeat("n", 64) + "\n",
			field: "networks.n", words: "Swarm allows 63",
		},
		"self-named config over 64": {
			file:  "services:\n  web:\n    image: nginx\n    configs: [c]\nconfigs:\n  c:\n    file: ./c.txt\n    name: " + strings.Repeat("c", 65) + "\n",
			field: "configs.c", words: "Swarm allows 64",
		},
		"secret ending in a dash": {
			file:  "services:\n  web:\n    image: nginx\n    secrets: [s]\nsecrets:\n  s:\n    file: ./c.txt\n    name: token-\n",
			field: "secrets.s", words: "not valid",
		},
	} {
		t.Run(name, func(t *testing.T) {
			d := Dir{Root: t.TempDir()}
			write(t, d, "compose.yaml", tt.file)
			write(t, d, "c.txt", "x")
			_, err := Render("stk", d)
			fe := faultOf(t, err)
			if fe.Field != tt.field || fe.File != "compose.yaml" || !strings.Contains(fe.Err.Error(), tt.words) {
				t.Errorf("got %s / %s: %v; want field %s mentioning %q", fe.File, fe.Field, fe.Err, tt.field, tt.words)
			}
		})
	}
	// The longest names Swarm takes pass: 63 for a service, 64 for a config.
	d := Dir{Root: t.TempDir()}
	write(t, d, "compose.yaml", "services:\n  "+strings.Repeat("s", 59)+":\n    image: nginx\n    configs: [c]\nconfigs:\n  c:\n    file: ./c.txt\n    name: "+strings.Repeat("c", 64)+"\n")
	write(t, d, "c.txt", "x")
	mustRender(t, "stk", d)
}

// "~" in a bind source names a home directory on the machine running
// docker stack deploy; a controller has no such thing to give the nodes,
// and the refusal says so rather than calling it a relative path.
func TestRenderExplainsThatTildeHasNoMeaningOnAController(t *testing.T) {
	for _, src := range []string{"~/configs", "~"} {
		d := Dir{Root: t.TempDir()}
		write(t, d, "compose.yaml", "services:\n  web:\n    image: nginx\n    volumes: [\""+src+":/etc/configs:ro\"]\n")
		_, err := Render("stk", d)
		fe := faultOf(t, err)
		msg := fe.Err.Error()
		if fe.Field != "services.web.volumes" || !strings.Contains(msg, `"`+src+`"`) || !strings.Contains(msg, "home directory") || strings.Contains(msg, "relative path") {
			t.Errorf("%s: %s: %v", src, fe.Field, fe.Err)
		}
		if !errors.Is(err, ErrUnsupported) {
			t.Errorf("%s: does not wrap ErrUnsupported", src)
		}
	}
}
