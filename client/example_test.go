package client_test

import (
	"context"
	"fmt"
	"log/slog"
	"net/http/httptest"

	"github.com/flotilla-gitops/flotilla/access"
	"github.com/flotilla-gitops/flotilla/api"
	"github.com/flotilla-gitops/flotilla/api/apitest"
	"github.com/flotilla-gitops/flotilla/client"
)

func Example() {
	// A controller API backed by an in-memory fake stands in for a real one.
	srv := httptest.NewServer(api.New(api.Options{
		Controller: apitest.NewController(apitest.Sample()...),
		Tokens:     api.Tokens{{Name: "admin", Role: access.Admin, Secret: "s3cret-admin-token"}},
		Logger:     slog.New(slog.DiscardHandler),
	}))
	defer srv.Close()

	c, err := client.New(srv.URL, "s3cret-admin-token", nil)
	if err != nil {
		panic(err)
	}
	ctx := context.Background()
	list, err := c.Applications(ctx)
	if err != nil {
		panic(err)
	}
	for _, a := range list.Items {
		fmt.Println(a.Name, a.Sync, a.Health)
	}
	r, err := c.Sync(ctx, "shop", api.SyncBody{}, client.Wait{Wait: true})
	if err != nil {
		panic(err)
	}
	fmt.Println(r.Phase, r.Status.Sync)
	// Output:
	// billing Synced Healthy
	// shop OutOfSync Progressing
	// Succeeded Synced
}
