package chartengine_test

import (
	"context"
	"fmt"
	"slices"

	"github.com/flotilla-gitops/flotilla/chartengine"
	"github.com/flotilla-gitops/flotilla/compose"
)

// Render the worked example for one customer: its values file, then a set
// key over it. The result is a compose manifest, converted here to the
// swarm services a deploy would write.
func ExampleRender() {
	r, err := chartengine.Render(chartengine.Dir{
		Root:       "../examples",
		Path:       "chart",
		ValueFiles: []string{"values-eu.yaml"},
		Set:        map[string]any{"web.replicas": 3},
	}, chartengine.Release{Name: "shop-eu", Revision: 1})
	if err != nil {
		fmt.Println(err)
		return
	}
	st, err := compose.Convert(context.Background(), r.Manifest, "shop-eu", nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	var names []string
	for name := range st.Services {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		s := st.Services[name]
		fmt.Println(name, *s.Mode.Replicated.Replicas, s.TaskTemplate.ContainerSpec.Env)
	}
	fmt.Println(r.Chart.Name, r.Chart.Version)
	// Output:
	// shop-eu_web 3 [APP_MESSAGE=hallo]
	// shop-eu_worker 1 [QUEUE=jobs-eu]
	// shop 0.1.0
}
