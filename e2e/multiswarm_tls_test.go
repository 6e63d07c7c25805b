package e2e

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"io"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/flotilla-gitops/flotilla/application"
	"github.com/flotilla-gitops/flotilla/backend"
	"github.com/flotilla-gitops/flotilla/internal/swarmtest"
	"github.com/flotilla-gitops/flotilla/swarms"
)

// testPKI is a CA with a server certificate for 127.0.0.1 and a client
// certificate, written as PEM files.
type testPKI struct {
	dir                       string
	pool                      *x509.CertPool
	server                    tls.Certificate
	ca, clientCert, clientKey string
}

func newTestPKI(t *testing.T) *testPKI {
	t.Helper()
	p := &testPKI{dir: t.TempDir(), pool: x509.NewCertPool()}
	key := func() *ecdsa.PrivateKey {
		k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	write := func(name, typ string, der []byte) string {
		path := filepath.Join(p.dir, name)
		if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	caKey := key()
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "flotilla test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	caCert, _ := x509.ParseCertificate(caDER)
	p.pool.AddCert(caCert)
	p.ca = write("ca.pem", "CERTIFICATE", caDER)
	leaf := func(serial int64, usage x509.ExtKeyUsage, ips []net.IP) ([]byte, *ecdsa.PrivateKey) {
		k := key()
		tmpl := &x509.Certificate{SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: fmt.Sprint("leaf", serial)},
			NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
			ExtKeyUsage: []x509.ExtKeyUsage{usage}, KeyUsage: x509.KeyUsageDigitalSignature, IPAddresses: ips}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, caCert, &k.PublicKey, caKey)
		if err != nil {
			t.Fatal(err)
		}
		return der, k
	}
	srvDER, srvKey := leaf(2, x509.ExtKeyUsageServerAuth, []net.IP{net.IPv4(127, 0, 0, 1)})
	p.server = tls.Certificate{Certificate: [][]byte{srvDER}, PrivateKey: srvKey}
	cliDER, cliKey := leaf(3, x509.ExtKeyUsageClientAuth, nil)
	p.clientCert = write("cert.pem", "CERTIFICATE", cliDER)
	keyDER, err := x509.MarshalECPrivateKey(cliKey)
	if err != nil {
		t.Fatal(err)
	}
	p.clientKey = write("key.pem", "EC PRIVATE KEY", keyDER)
	return p
}

// tlsDaemon puts the local daemon behind a TLS listener on loopback that
// requires a client certificate of p's CA, as `dockerd --tlsverify` does,
// and returns its tcp:// host.
func tlsDaemon(t *testing.T, p *testPKI) string {
	t.Helper()
	l, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{
		Certificates: []tls.Certificate{p.server}, ClientCAs: p.pool,
		ClientAuth: tls.RequireAndVerifyClientCert, MinVersion: tls.VersionTLS12,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				d, err := net.Dial("unix", swarmtest.Socket())
				if err != nil {
					return
				}
				defer d.Close()
				go func() { _, _ = io.Copy(d, c) }()
				_, _ = io.Copy(c, d)
			}()
		}
	}()
	return "tcp://" + l.Addr().String()
}

func TestASwarmReachedOverTLSIsReadWithTheClientCertificateAndRefusedWithout(t *testing.T) {
	t.Parallel()
	swarmtest.Need(t)
	p := newTestPKI(t)
	host := tlsDaemon(t, p)
	local, err := backend.New(context.Background(), backend.Options{Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	check := func(tlsFiles *application.TLS) swarms.Status {
		t.Helper()
		reg, err := swarms.New(context.Background(), []application.Swarm{{Name: "eu", Hosts: []string{host}, TLS: tlsFiles}},
			swarms.Options{Local: local, Logger: quiet, Backend: backend.Options{Logger: quiet}})
		if err != nil {
			t.Fatal(err)
		}
		return reg.Check(context.Background())[0]
	}
	if st := check(&application.TLS{CAFile: p.ca, CertFile: p.clientCert, KeyFile: p.clientKey}); !st.Reachable || st.EngineVersion == "" || st.Host != host {
		t.Fatalf("with the client certificate: %+v", st)
	}
	if st := check(&application.TLS{CAFile: p.ca}); st.Reachable || !strings.Contains(st.Error, "certificate") {
		t.Errorf("without a client certificate: %+v, want refused for want of a certificate", st)
	}
	if st := check(nil); st.Reachable {
		t.Errorf("plain HTTP to a TLS daemon: %+v, want refused", st)
	}
}
