package main

import (
	"bytes"
	"encoding/json"
	"regexp"
	"testing"

	"github.com/flotilla-gitops/flotilla/api"
)

func TestSwarmListShowsReachabilityNodesManagersEngineHostAndApplications(t *testing.T) {
	e := newCLIEnv(t)
	e.ctl.SwarmList = []api.SwarmStatus{
		{Name: "eu", Reachable: true, Host: "unix:///run/eu/2.sock", Nodes: 3, Managers: 3, EngineVersion: "20.10.24", Applications: 1},
		{Name: "lab", Error: "swarm lab: ssh://lab: connection refused", Host: "ssh://lab"},
	}
	c := e.client(t, cliReadToken)
	var out bytes.Buffer
	if err := runSwarmList(t.Context(), c, swarmListOptions{opts(outputTable)}, &out); err != nil {
		t.Fatal(err)
	}
	table := out.String()
	for _, re := range []string{
		`(?m)^NAME +REACHABLE +NODES +MANAGERS +ENGINE +HOST +APPS +MESSAGE$`,
		`(?m)^eu +yes +3 +3 +20\.10\.24 +unix:///run/eu/2\.sock +1 *$`,
		`(?m)^lab +no +0 +0 +- +ssh://lab +0 +swarm lab: ssh://lab: connection refused$`,
	} {
		if !regexp.MustCompile(re).MatchString(table) {
			t.Errorf("table does not match %s:\n%s", re, table)
		}
	}
	out.Reset()
	if err := runSwarmList(t.Context(), c, swarmListOptions{opts(outputJSON)}, &out); err != nil {
		t.Fatal(err)
	}
	var list api.SwarmList
	if err := json.Unmarshal(out.Bytes(), &list); err != nil || len(list.Items) != 2 || list.Items[0].Managers != 3 {
		t.Fatalf("json: %v\n%s", err, out.String())
	}
}
