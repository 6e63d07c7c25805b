package main

import (
	"bytes"
	"context"
	"errors"
	"os"
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
		"--stack":          func(p *installPlan) { p.stack = "Flotilla" },
		"--image":          func(p *installPlan) { p.image = "" },
		"--replicas":       func(p *installPlan) { p.replicas = 0 },
		"--publish ":       func(p *installPlan) { p.publish = 70000 },
		"--publish-mode":   func(p *installPlan) { p.publishMode = "mesh" },
		"--docker-socket":  func(p *installPlan) { p.socket = "" },
		"--lease-duration": func(p *installPlan) { p.lease = time.Second },
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
	s := p.spec("net1", [2]string{"flotilla-applications-x", "id1"}, [2]string{"flotilla-admin-token-y", "id2"})
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
	if *s.Mode.Replicated.Replicas != 2 || s.UpdateConfig.Order != swarm.UpdateOrderStartFirst || s.UpdateConfig.FailureAction != swarm.UpdateFailureActionRollback {
		t.Errorf("replicas %d update %+v", *s.Mode.Replicated.Replicas, s.UpdateConfig)
	}
	if len(s.EndpointSpec.Ports) != 1 || s.EndpointSpec.Ports[0].PublishedPort != 8080 {
		t.Errorf("ports %+v", s.EndpointSpec.Ports)
	}

	p.publishMode = "host"
	s = p.spec("net1", [2]string{}, [2]string{})
	if s.UpdateConfig.Order != swarm.UpdateOrderStopFirst || s.RollbackConfig.Order != swarm.UpdateOrderStopFirst {
		t.Errorf("host-mode port: update order %s, rollback %s; want stop-first (the port cannot be bound twice)", s.UpdateConfig.Order, s.RollbackConfig.Order)
	}
	p.publish = 0
	if s = p.spec("net1", [2]string{}, [2]string{}); s.EndpointSpec != nil || s.UpdateConfig.Order != swarm.UpdateOrderStartFirst || p.readyURL() != "" {
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
