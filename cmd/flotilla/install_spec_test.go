package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/moby/moby/api/types/swarm"
)

func testPlan() installPlan {
	return installPlan{stack: "flotilla", image: "flotilla:1.0.0", replicas: 2, publish: 8080,
		publishMode: "ingress", socket: "/var/run/docker.sock", lease: 15 * time.Second}
}

func TestInstallPlanRefusalsNameTheFlag(t *testing.T) {
	for flag, mutate := range map[string]func(*installPlan){
		"--stack":                    func(p *installPlan) { p.stack = "Flotilla" },
		"--image":                    func(p *installPlan) { p.image = "" },
		"--replicas":                 func(p *installPlan) { p.replicas = 0 },
		"--publish ":                 func(p *installPlan) { p.publish = 70000 },
		"--publish-mode":             func(p *installPlan) { p.publishMode = "mesh" },
		"--docker-socket":            func(p *installPlan) { p.socket = "" },
		"--lease-duration":           func(p *installPlan) { p.lease = time.Second },
		"--network edge":             func(p *installPlan) { p.networks = []string{"edge", "edge"} },
		"--network:":                 func(p *installPlan) { p.networks = []string{""} },
		"--network flotilla_default": func(p *installPlan) { p.networks = []string{"flotilla_default"} },
	} {
		p := testPlan()
		mutate(&p)
		err := p.validate()
		if err == nil || !strings.Contains(err.Error(), flag) {
			t.Errorf("%s: validate() = %v, want an error naming the flag", flag, err)
		}
	}
	if err := testPlan().validate(); err != nil {
		t.Fatalf("a valid plan refused: %v", err)
	}
}

func TestSecretNamesFollowContentSoAnUnchangedFileKeepsItsSecret(t *testing.T) {
	a, b := secretName("s", "admin-token", []byte("one")), secretName("s", "admin-token", []byte("one"))
	c := secretName("s", "admin-token", []byte("two"))
	if a != b || a == c {
		t.Fatalf("names %q %q %q: want equal for equal content, different otherwise", a, b, c)
	}
	if !strings.HasPrefix(a, "s-admin-token-") || strings.Contains(a, "one") {
		t.Fatalf("name %q: want s-admin-token-<digest>, never the content", a)
	}
}

func TestInstallSpecIsTheExampleStacksServiceAndHostPortsStopFirst(t *testing.T) {
	p := testPlan()
	s := p.spec("net1", nil, installSecrets{apps: [2]string{"flotilla-applications-x", "id1"}, admin: [2]string{"flotilla-admin-token-y", "id2"}})
	if s.Name != "flotilla_controller" || s.Labels[labelInstall] != "flotilla" || s.Labels[labelNamespace] != "flotilla" {
		t.Fatalf("name %q labels %v", s.Name, s.Labels)
	}
	cs := s.TaskTemplate.ContainerSpec
	args := strings.Join(cs.Args, " ")
	for _, want := range []string{"controller --ha", "--controller-id=flotilla", "--config=/run/secrets/flotilla-applications", "--listen=:8080", "--lease-duration=15s"} {
		if !strings.Contains(args, want) {
			t.Errorf("args %q lack %q", args, want)
		}
	}
	if len(cs.Secrets) != 2 || cs.Secrets[0].SecretID != "id1" || cs.Secrets[1].File.Name != "flotilla-admin-token" {
		t.Errorf("secrets %+v", cs.Secrets)
	}
	if env := strings.Join(cs.Env, " "); strings.Contains(env, "FLOTILLA_READ_TOKEN") {
		t.Errorf("env %q names a read token, but none was installed", env)
	}
	if n := s.TaskTemplate.Networks; len(n) != 1 || n[0].Target != "net1" || !slices.Equal(n[0].Aliases, []string{"controller"}) {
		t.Errorf("networks %+v, want net1 alone, as controller", n)
	}
	if *s.Mode.Replicated.Replicas != 2 || s.UpdateConfig.Order != swarm.UpdateOrderStartFirst || s.UpdateConfig.FailureAction != swarm.UpdateFailureActionRollback {
		t.Errorf("replicas %d update %+v", *s.Mode.Replicated.Replicas, s.UpdateConfig)
	}
	if len(s.EndpointSpec.Ports) != 1 || s.EndpointSpec.Ports[0].PublishedPort != 8080 {
		t.Errorf("ports %+v", s.EndpointSpec.Ports)
	}

	p.publishMode = "host"
	s = p.spec("net1", nil, installSecrets{})
	if s.UpdateConfig.Order != swarm.UpdateOrderStopFirst || s.RollbackConfig.Order != swarm.UpdateOrderStopFirst {
		t.Errorf("host-mode port: update order %s, rollback %s; want stop-first (the port cannot be bound twice)", s.UpdateConfig.Order, s.RollbackConfig.Order)
	}
	p.publish = 0
	if s = p.spec("net1", nil, installSecrets{}); s.EndpointSpec != nil || s.UpdateConfig.Order != swarm.UpdateOrderStartFirst || p.readyURL() != "" {
		t.Errorf("no port: endpoint %+v order %s readyURL %q", s.EndpointSpec, s.UpdateConfig.Order, p.readyURL())
	}
}

func TestInstallRefusesAnInvalidApplicationsFileBeforeTouchingTheSwarm(t *testing.T) {
	dir := t.TempDir()
	apps, tok := dir+"/apps.yaml", dir+"/token"
	if err := os.WriteFile(apps, []byte("apiVersion: flotilla/v1\napplications:\n  - name: Bad Name\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(tok, []byte("t"), 0o600); err != nil {
		t.Fatal(err)
	}
	// No daemon at this address: an attempt to reach one would fail with
	// another error than the file's problems.
	t.Setenv("DOCKER_HOST", "unix://"+dir+"/no.sock")
	var out bytes.Buffer
	o := installOptions{plan: testPlan(), appsFile: apps, tokenFile: tok}
	err := runInstall(context.Background(), &out, o)
	var ee exitError
	if !errors.As(err, &ee) || ee.code != exitFailed {
		t.Fatalf("runInstall = %v, want exit %d", err, exitFailed)
	}
	if !strings.Contains(out.String(), "name") {
		t.Fatalf("output %q does not name the problem", out.String())
	}
}

// A router on a network of its own polls the controller with a read token:
// the controller joins that network under the alias the router polls, and
// reads the token from the mounted secret.
func TestInstallSpecJoinsTheRoutersNetworkAndMountsTheReadToken(t *testing.T) {
	p := testPlan()
	p.networks = []string{"edge"}
	s := p.spec("net1", []string{"edge-id"}, installSecrets{apps: [2]string{"a", "id1"}, admin: [2]string{"b", "id2"}, read: [2]string{"flotilla-read-token-z", "id3"}})
	nets := s.TaskTemplate.Networks
	if len(nets) != 2 || nets[0].Target != "net1" || nets[1].Target != "edge-id" || !slices.Equal(nets[1].Aliases, []string{"controller"}) {
		t.Fatalf("networks %+v, want net1 then edge-id, each as controller", nets)
	}
	cs := s.TaskTemplate.ContainerSpec
	if len(cs.Secrets) != 3 || cs.Secrets[2].SecretID != "id3" || cs.Secrets[2].File.Name != "flotilla-read-token" || cs.Secrets[2].File.Mode != 0o400 {
		t.Fatalf("secrets %+v, want the read token's third, 0400", cs.Secrets)
	}
	if !slices.Contains(cs.Env, "FLOTILLA_READ_TOKEN_FILE=/run/secrets/flotilla-read-token") {
		t.Fatalf("env %v lacks the read token's file", cs.Env)
	}
	if strings.Contains(strings.Join(cs.Args, " "), "read-token") {
		t.Fatalf("args %v name the read token; it comes from the environment only", cs.Args)
	}
}

// A read token the controller would refuse (empty, or the admin token) is
// refused before the swarm is touched, naming the flag.
func TestInstallRefusesAReadTokenTheControllerWouldRefuse(t *testing.T) {
	dir := t.TempDir()
	apps, tok := dir+"/apps.yaml", dir+"/token"
	write := func(path, content string) {
		if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(apps, "apiVersion: flotilla/v1\napplications: []\n")
	write(tok, "admin-secret\n")
	write(dir+"/empty", " \n")
	write(dir+"/same", "admin-secret")
	t.Setenv("DOCKER_HOST", "unix://"+dir+"/no.sock")
	for _, read := range []string{dir + "/empty", dir + "/same", dir + "/missing"} {
		o := installOptions{plan: testPlan(), appsFile: apps, tokenFile: tok, readFile: read}
		var out bytes.Buffer
		err := runInstall(context.Background(), &out, o)
		if err == nil || !strings.Contains(err.Error(), "--read-token-file") || strings.Contains(err.Error()+out.String(), "admin-secret") {
			t.Errorf("read token %s: runInstall = %v (output %q), want an error naming --read-token-file and never the token", read, err, out.String())
		}
		if err != nil && strings.Contains(err.Error(), "no.sock") {
			t.Errorf("read token %s: the daemon was asked before the file was checked: %v", read, err)
		}
	}
}
