package notify

import (
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/flotilla-gitops/flotilla/application"
)

// silentServer accepts connections on 127.0.0.1 and reads requests without
// ever answering, counting the connections that sent something.
func silentServer(t *testing.T) (addr string, requests *atomic.Int32) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	requests = new(atomic.Int32)
	var conns []net.Conn
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			conns = append(conns, c)
			go func() {
				buf := make([]byte, 4096)
				counted := false
				for {
					if _, err := c.Read(buf); err != nil {
						return
					}
					if !counted {
						counted = true
						requests.Add(1)
					}
				}
			}()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		<-done
		for _, c := range conns {
			c.Close()
		}
	})
	return ln.Addr().String(), requests
}

func TestASinkThatNeverAnswersFailsEachAttemptAtItsTimeout(t *testing.T) {
	addr, requests := silentServer(t)
	url := "http://" + addr + "/hooks/T000/B000/sekrit-path-token"
	h := start(t, []application.Notification{sinkConfig(t, "silent", application.NotifyWebhook, url)},
		Options{AttemptTimeout: 200 * time.Millisecond, MaxAttempts: 3})

	start := time.Now()
	h.broker.Publish(failed("shop", "boom"))
	waitFor(t, "the notification to be given up", func() bool { return h.stats("silent").Failed == 1 })
	t.Logf("given up after %s", time.Since(start).Round(time.Millisecond))
	if n := requests.Load(); n != 3 {
		t.Errorf("the silent sink saw %d requests, want 3 (one per attempt)", n)
	}
	logs := h.logs.String()
	if !strings.Contains(logs, "deadline exceeded") {
		t.Errorf("the logs do not say the attempts timed out:\n%s", logs)
	}
	if strings.Contains(logs, "sekrit") {
		t.Errorf("the sink URL reached the logs:\n%s", logs)
	}
}

func TestAURLFileThatIsANamedPipeFailsTheDeliveryInsteadOfBlockingIt(t *testing.T) {
	fifo := filepath.Join(t.TempDir(), "url")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Skipf("mkfifo: %v", err)
	}
	h := start(t, []application.Notification{{Name: "piped", Type: application.NotifyWebhook, URLFile: fifo}}, Options{})
	// Registered after start, so it runs before the dispatcher is waited
	// for: it frees a sink blocked in open, should the guard be missing.
	t.Cleanup(func() {
		if f, err := os.OpenFile(fifo, os.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
			f.Close()
		}
	})
	h.broker.Publish(failed("shop", "boom"))
	waitFor(t, "the delivery to be given up", func() bool { return h.stats("piped").Failed == 1 })
	if !strings.Contains(h.logs.String(), "not a regular file") {
		t.Errorf("the logs do not say why:\n%s", h.logs.String())
	}
}
