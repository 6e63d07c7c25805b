package api

import (
	"log/slog"
	"net/http"
	"time"
)

// Timeouts bound one connection to the API; zero means none. Event streams
// and waited syncs lift Write for themselves, so a long answer is not cut,
// while a client that sends its headers or body slowly still is.
type Timeouts struct {
	// Read bounds reading a request, headers and body. Headers alone get
	// at most 10s within it.
	Read time.Duration
	// Write bounds writing an answer, from the end of the request's
	// headers.
	Write time.Duration
	// Idle bounds how long a keep-alive connection waits for its next
	// request.
	Idle time.Duration
}

// Defaults for Timeouts, as the controller's flags use them.
const (
	DefaultReadTimeout  = 30 * time.Second
	DefaultWriteTimeout = time.Minute
	DefaultIdleTimeout  = 2 * time.Minute
	maxHeaderTimeout    = 10 * time.Second
)

// NewServer returns the http.Server that serves h with t. Errors the server
// itself meets (TLS handshakes, timed-out clients) go to log at warn level.
func NewServer(h http.Handler, t Timeouts, log *slog.Logger) *http.Server {
	header := maxHeaderTimeout
	if t.Read > 0 && t.Read < header {
		header = t.Read
	}
	if log == nil {
		log = slog.Default()
	}
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: header,
		ReadTimeout:       t.Read,
		WriteTimeout:      t.Write,
		IdleTimeout:       t.Idle,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
}
