package registrytest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

const (
	tokenServiceName = "flotilla-test-registry"
	tokenIssuer      = "flotilla-test-token-service"
)

// tokenService issues the JWTs Distribution's token auth verifies: ES256,
// with the signing certificate in the x5c header, chained to the
// rootcertbundle the registry is configured with. It is the test's
// stand-in for a registry's authorization server (Docker Hub's
// auth.docker.io), which Distribution itself does not include.
type tokenService struct {
	key      *ecdsa.PrivateKey
	certDER  []byte
	certFile string
	realm    string
	issued   atomic.Int64
}

type access struct {
	Type    string   `json:"type"`
	Name    string   `json:"name"`
	Actions []string `json:"actions"`
}

func startTokenService(t testing.TB, dir, user, password string) *tokenService {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: tokenIssuer},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	ts := &tokenService{key: key, certDER: der, certFile: filepath.Join(dir, "token.crt")}
	if err := os.WriteFile(ts.certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/token", func(w http.ResponseWriter, r *http.Request) {
		u, p, ok := r.BasicAuth()
		if user != "" && (!ok || u != user || p != password) {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		var grants []access
		for _, scope := range r.URL.Query()["scope"] {
			// repository:NAME:pull — only pull is granted to clients.
			parts := strings.Split(scope, ":")
			if len(parts) == 3 && parts[0] == "repository" {
				grants = append(grants, access{Type: "repository", Name: parts[1], Actions: []string{"pull"}})
			}
		}
		tok, err := ts.mint(u, grants)
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		ts.issued.Add(1)
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{"token": tok, "expires_in": 300})
	})
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(func() { _ = srv.Close() })
	ts.realm = "http://" + l.Addr().String() + "/token"
	return ts
}

// mint signs a token granting grants to subject.
func (ts *tokenService) mint(subject string, grants []access) (string, error) {
	enc := base64.RawURLEncoding
	header, _ := json.Marshal(map[string]any{"alg": "ES256", "typ": "JWT", "x5c": []string{base64.StdEncoding.EncodeToString(ts.certDER)}})
	now := time.Now()
	claims, _ := json.Marshal(map[string]any{
		"iss": tokenIssuer, "sub": subject, "aud": tokenServiceName,
		"exp": now.Add(5 * time.Minute).Unix(), "nbf": now.Add(-time.Minute).Unix(), "iat": now.Unix(),
		"jti": fmt.Sprint(now.UnixNano()), "access": grants,
	})
	signing := enc.EncodeToString(header) + "." + enc.EncodeToString(claims)
	h := sha256.Sum256([]byte(signing))
	r, s, err := ecdsa.Sign(rand.Reader, ts.key, h[:])
	if err != nil {
		return "", err
	}
	sig := make([]byte, 64)
	r.FillBytes(sig[:32])
	s.FillBytes(sig[32:])
	return signing + "." + enc.EncodeToString(sig), nil
}
