package swarmnodes

import (
	"testing"
)

func TestTheScriptsStatusLinesGiveEachNodesSocketRoleAndPid(t *testing.T) {
	out := []byte("swarm-nodes: noise\n" +
		"node mn1a2b3c-1 unix:///run/flotilla-nodes/mn1a2b3c/1/docker.sock manager 10.213.7.11 4242\n" +
		"node mn1a2b3c-2 unix:///run/flotilla-nodes/mn1a2b3c/2/docker.sock worker 10.213.7.12 down\n")
	lines, err := parseStatusLines(out)
	if err != nil {
		t.Fatal(err)
	}
	if len(lines) != 2 {
		t.Fatalf("%d lines, want 2: %+v", len(lines), lines)
	}
	m, w := lines[0], lines[1]
	if m.Name != "mn1a2b3c-1" || m.Host != "unix:///run/flotilla-nodes/mn1a2b3c/1/docker.sock" || m.Role != "manager" ||
		m.Addr != "10.213.7.11" || m.Index != 1 || m.pid != 4242 {
		t.Errorf("manager line: %+v", m)
	}
	if w.Role != "worker" || w.Index != 2 || w.pid != 0 {
		t.Errorf("worker line of a stopped daemon: %+v", w)
	}
	if _, err := parseStatusLines([]byte("nothing\n")); err == nil {
		t.Error("output without a node line parsed")
	}
	if _, err := parseStatusLines([]byte("node x-1 unix:///s manager 10.0.0.1 notapid\n")); err == nil {
		t.Error("a line with a bad pid parsed")
	}
}

func TestASpecOutsideWhatTheScriptTakesIsRefusedBeforeAnythingStarts(t *testing.T) {
	for _, s := range []Spec{
		{Prefix: "toolong", Nodes: 3},
		{Prefix: "UP", Nodes: 3},
		{Prefix: "mn", Nodes: 0},
		{Prefix: "mn", Nodes: 10},
		{Prefix: "mn", Nodes: 3, Workers: 3},
	} {
		if _, err := up(s); err == nil {
			t.Errorf("spec %+v accepted", s)
		}
	}
}
