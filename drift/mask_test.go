package drift

import (
	"strings"
	"testing"

	"github.com/moby/moby/api/types/swarm"
)

func TestDiff_masksEnvTheCallerKnowsWasDecrypted(t *testing.T) {
	spec := func(env ...string) swarm.ServiceSpec {
		return swarm.ServiceSpec{TaskTemplate: swarm.TaskSpec{ContainerSpec: &swarm.ContainerSpec{Image: "app:1", Env: env}}}
	}
	// DB_NAME matches no secret-looking pattern, so only MaskEnv hides it.
	desired, live := spec("DB_NAME=decrypted-one", "MODE=a"), spec("DB_NAME=decrypted-two", "MODE=b")
	changes := Diff(desired, live, Options{MaskEnv: map[string]bool{"DB_NAME": true}})
	if len(changes) != 2 {
		t.Fatalf("changes %+v", changes)
	}
	for _, c := range changes {
		text := c.Desired + " " + c.Live
		switch c.Field {
		case "env.DB_NAME":
			if !c.Masked || strings.Contains(text, "decrypted") {
				t.Errorf("sealed env shown: %+v", c)
			}
		case "env.MODE":
			if c.Masked || c.Desired != "a" || c.Live != "b" {
				t.Errorf("plain env masked or wrong: %+v", c)
			}
		}
	}
}
