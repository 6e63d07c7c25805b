package api

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// A pass the stop ends delivers its error just as Stopping closes, and a
// select between the two picks either. Whichever it is, a waited sync
// answers the 503 that says the controller is stopping, never 200 "Failed"
// (the e2e SIGTERM test got that about one run in two on a loaded machine).
func TestAnswer_aWaitedSyncTheStopEndedIs503WhicheverComesFirst(t *testing.T) {
	stopping := make(chan struct{})
	close(stopping)
	s := &server{opts: Options{Stopping: stopping}, now: time.Now}
	for i := range 50 {
		done := make(chan SyncResult, 1)
		done <- SyncResult{Err: fmt.Errorf("application \"shop\": the controller stopped before serving the request: %w", context.Canceled)}
		w := httptest.NewRecorder()
		r := httptest.NewRequest(http.MethodPost, "/api/v1/applications/shop/sync?wait=true", nil)
		err := s.answer(w, r, "shop", done, true, time.Minute)
		e, ok := err.(*Error)
		if !ok || e.Status != http.StatusServiceUnavailable || !strings.Contains(e.Message, "the controller is stopping") {
			t.Fatalf("try %d: answered %d %s, error %v; want the 503 of a stopping controller", i, w.Code, w.Body, err)
		}
	}
}
