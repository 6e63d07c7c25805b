package notify_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"time"

	"github.com/flotilla-gitops/flotilla/application"
	"github.com/flotilla-gitops/flotilla/events"
	"github.com/flotilla-gitops/flotilla/notify"
)

// A Slack sink for one application's failures. The URL lives in a file,
// as a swarm secret would.
func Example() {
	got := make(chan string, 1)
	slack := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		got <- string(body)
	}))
	defer slack.Close()
	dir, _ := os.MkdirTemp("", "notify")
	defer os.RemoveAll(dir)
	urlFile := filepath.Join(dir, "slack-url")
	_ = os.WriteFile(urlFile, []byte(slack.URL+"/services/T000/B000/XXXX\n"), 0o600)

	d, err := notify.New([]application.Notification{{
		Name:         "ops-slack",
		Type:         application.NotifySlack,
		URLFile:      urlFile,
		Events:       []events.Type{events.SyncFailed},
		Applications: []string{"shop"},
	}}, notify.Options{})
	if err != nil {
		fmt.Println(err)
		return
	}
	broker := events.NewBroker(events.BrokerOptions{})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { d.Run(ctx, broker); close(done) }()
	for broker.Subscribers() == 0 {
		time.Sleep(time.Millisecond) // Run subscribes in its own goroutine
	}

	broker.Publish(events.Event{Type: events.SyncSucceeded, App: "shop"}) // filtered out
	broker.Publish(events.Event{Type: events.SyncFailed, App: "shop", Revision: "4f2a9c1e0b7d", Message: "image shop:1.4 not found"})
	fmt.Println(<-got)
	cancel()
	<-done
	// Output: {"text":"*shop* sync.failed at `4f2a9c1e0b7d`: image shop:1.4 not found"}
}
