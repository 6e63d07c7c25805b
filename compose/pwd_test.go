package compose

import (
	"errors"
	"strings"
	"testing"
)

// A stack file written to be deployed from its own directory names its
// files with $PWD; it must render exactly as the same file with "./".
func TestPWDIsTheApplicationsDirectory(t *testing.T) {
	for _, spelling := range []string{"${PWD}/conf/nginx.conf", "$PWD/conf/nginx.conf", "${PWD:-/nowhere}/conf/nginx.conf"} {
		t.Run(spelling, func(t *testing.T) {
			dot := Dir{Root: t.TempDir(), Path: "apps/web"}
			pwd := Dir{Root: t.TempDir(), Path: "apps/web"}
			for _, d := range []Dir{dot, pwd} {
				write(t, d, "conf/nginx.conf", "server { listen 80; }\n")
				write(t, d, "conf/web.env", "MODE=prod\n")
			}
			write(t, dot, "compose.yaml", "services:\n  web:\n    image: nginx\n    configs: [nginx]\n    env_file: ./conf/web.env\nconfigs:\n  nginx:\n    file: ./conf/nginx.conf\n")
			envPath := strings.Replace(spelling, "nginx.conf", "web.env", 1)
			write(t, pwd, "compose.yaml", "services:\n  web:\n    image: nginx\n    configs: [nginx]\n    env_file: "+envPath+"\nconfigs:\n  nginx:\n    file: "+spelling+"\n")
			want := mustRender(t, "demo", dot)
			got := mustRender(t, "demo", pwd)
			if got.Manifest != want.Manifest {
				t.Errorf("$PWD renders differently from ./:\n--- ./\n%s\n--- $PWD\n%s", want.Manifest, got.Manifest)
			}
			if !strings.Contains(got.Manifest, "MODE") {
				t.Errorf("env_file through $PWD not read:\n%s", got.Manifest)
			}
		})
	}
}

// $PWD outside a file path would hand a container the controller's
// made-up checkout directory; a relative bind through $PWD is still a
// relative bind.
func TestPWDOutsideAFilePathIsRefused(t *testing.T) {
	cases := []struct{ name, compose, msg, field string }{
		{"environment", "services:\n  web:\n    image: nginx\n    environment:\n      DATA: ${PWD}/data\n", "$PWD", ""},
		{"label", "services:\n  web:\n    image: nginx\n    deploy:\n      labels:\n        where: $PWD\n", "$PWD", ""},
		{"bind mount", "services:\n  web:\n    image: nginx\n    volumes:\n      - ${PWD}/data:/data\n", "./data", "services.web.volumes"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			d := Dir{Root: t.TempDir(), Path: "app"}
			write(t, d, "compose.yaml", c.compose)
			_, err := Render("demo", d)
			fe := faultOf(t, err)
			if fe.File != "app/compose.yaml" || fe.Field != c.field || !errors.Is(err, ErrUnsupported) || !strings.Contains(err.Error(), c.msg) {
				t.Errorf("got File %q Field %q: %v", fe.File, fe.Field, err)
			}
			if strings.Contains(err.Error(), d.Root) || strings.Contains(err.Error(), loaderTop) {
				t.Errorf("error shows a machine path: %v", err)
			}
		})
	}
}

// An env file that sets PWD is obeyed, as the operator's shell would be.
func TestAnEnvFileMaySetPWD(t *testing.T) {
	d := Dir{Root: t.TempDir(), Path: "app", EnvFiles: []string{"deploy.env"}}
	write(t, d, "deploy.env", "PWD=/srv/app\n")
	write(t, d, "compose.yaml", "services:\n  web:\n    image: nginx\n    volumes:\n      - ${PWD}/data:/data\n")
	r := mustRender(t, "demo", d)
	if !strings.Contains(r.Manifest, "/srv/app/data") {
		t.Errorf("PWD from the env file not used:\n%s", r.Manifest)
	}
}

// Every service with a relative bind is named in one refusal, not only
// the first.
func TestEveryRelativeBindIsNamed(t *testing.T) {
	d := Dir{Root: t.TempDir(), Path: "app"}
	write(t, d, "compose.yaml", "services:\n  web:\n    image: nginx\n    volumes: [./html:/usr/share/nginx/html]\n  db:\n    image: postgres\n    volumes: [./pg:/var/lib/postgresql/data]\n  cache:\n    image: redis\n    volumes: [/srv/redis:/data]\n")
	_, err := Render("demo", d)
	fe := faultOf(t, err)
	if fe.File != "app/compose.yaml" || !errors.Is(err, ErrUnsupported) {
		t.Fatalf("got %#v: %v", fe, err)
	}
	for _, want := range []string{"services.db.volumes", "services.web.volumes", "./pg", "./html"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("refusal does not name %q: %v", want, err)
		}
	}
	if strings.Contains(err.Error(), "cache") {
		t.Errorf("refusal names a service with an absolute bind: %v", err)
	}
}
