package compose_test

import (
	"context"
	"fmt"
	"sort"

	"github.com/flotilla-gitops/flotilla/compose"
)

func ExampleRender() {
	r, err := compose.Render("demo", compose.Dir{
		Root:     "testdata",
		Path:     "stack",
		Files:    []string{"compose.yaml", "compose.prod.yaml"},
		EnvFiles: []string{"app.env"},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	// A stored manifest converts with no swarm at all.
	st, err := compose.Convert(context.Background(), r.Manifest, "demo", nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	var names []string
	for name := range st.Services {
		names = append(names, name)
	}
	for name := range st.Configs {
		names = append(names, name)
	}
	for name := range r.Secrets {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Println(n)
	}
	// Output:
	// demo_app_conf-c477fcdc10
	// demo_cache
	// demo_db_password-a2c9f0ee9a
	// demo_web
	// demo_worker
}

func ExampleServiceNames() {
	r, err := compose.Render("demo", compose.Dir{Root: "testdata", Path: "stack", EnvFiles: []string{"app.env"}})
	if err != nil {
		fmt.Println(err)
		return
	}
	names, _ := compose.ServiceNames(r.Manifest)
	fmt.Println(names)
	// Output: [cache web worker]
}
