// Package traefiktest runs a real Traefik (built from its Go module by
// scripts/traefik.sh) on loopback for tests of the router package and of
// whatever serves its configuration.
package traefiktest

import (
	"net"
	"os"
	"os/exec"
	"strconv"
	"testing"
	"time"

	"github.com/flotilla-gitops/flotilla/internal/testproc"
)

// Buckets are the request duration histogram bounds the test Traefik uses,
// finer than Traefik's default (0.1, 0.3, 1.2, 5) so that loopback latencies
// fall in more than one bucket.
const Buckets = "0.001,0.0025,0.005,0.01,0.025,0.05,0.1,0.25,0.5,1,2.5,5"

// Traefik is a running Traefik process.
type Traefik struct {
	// Web is the base URL of the entry point named "web", where routes are
	// served.
	Web string
	// Admin is the base URL of the entry point named "traefik", which holds
	// the API (/api/rawdata), /ping and the Prometheus metrics (/metrics).
	Admin string
	proc  *testproc.Proc
}

// Start runs Traefik from $FLOTILLA_TRAEFIK, polling its dynamic
// configuration from providerURL every 100 ms, and stops it when the test
// ends. Without FLOTILLA_TRAEFIK the test is skipped, unless
// FLOTILLA_REQUIRE_TRAEFIK=1 (then it fails).
func Start(t testing.TB, providerURL string) *Traefik {
	t.Helper()
	bin := os.Getenv("FLOTILLA_TRAEFIK")
	if bin == "" {
		if os.Getenv("FLOTILLA_REQUIRE_TRAEFIK") == "1" {
			t.Fatal("FLOTILLA_REQUIRE_TRAEFIK=1 but FLOTILLA_TRAEFIK names no traefik binary (scripts/traefik.sh builds one)")
		}
		t.Skip("FLOTILLA_TRAEFIK names no traefik binary (eval \"$(scripts/traefik.sh)\")")
	}
	web, admin := freePort(t), freePort(t)
	tr := &Traefik{
		Web:   "http://127.0.0.1:" + strconv.Itoa(web),
		Admin: "http://127.0.0.1:" + strconv.Itoa(admin),
	}
	cmd := exec.Command(bin, Flags(web, admin, providerURL)...)
	cmd.Dir = t.TempDir()
	tr.proc = testproc.Start(t, "traefik", cmd)
	tr.proc.WaitHTTP(t, tr.Admin+"/ping", 60*time.Second, testproc.OK)
	return tr
}

// Flags are the command-line flags Start gives Traefik: two loopback entry
// points, the HTTP provider, the API, ping and Prometheus metrics.
func Flags(webPort, adminPort int, providerURL string) []string {
	return []string{
		"--global.checkNewVersion=false",
		"--global.sendAnonymousUsage=false",
		"--log.level=INFO",
		"--entryPoints.web.address=127.0.0.1:" + strconv.Itoa(webPort),
		"--entryPoints.traefik.address=127.0.0.1:" + strconv.Itoa(adminPort),
		"--api.insecure=true",
		"--ping=true",
		"--metrics.prometheus=true",
		"--metrics.prometheus.entryPoint=traefik",
		"--metrics.prometheus.buckets=" + Buckets,
		"--providers.http.endpoint=" + providerURL,
		"--providers.http.pollInterval=100ms",
		"--providers.providersThrottleDuration=100ms",
	}
}

// Logs is what Traefik wrote so far.
func (tr *Traefik) Logs() string { return tr.proc.Logs.String() }

func freePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}
