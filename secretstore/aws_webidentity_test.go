package secretstore_test

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/flotilla-gitops/flotilla/application"
	"github.com/flotilla-gitops/flotilla/secretstore"
	"github.com/flotilla-gitops/flotilla/secretstore/kumotest"
)

// stsCalls records the STS requests the SDK's credential chain sends on
// their way to kumo: their Action, RoleArn and WebIdentityToken.
type stsCalls struct {
	mu  sync.Mutex
	all []url.Values
}

func (c *stsCalls) proxy(t *testing.T, to string) string {
	u, err := url.Parse(to)
	if err != nil {
		t.Fatal(err)
	}
	rp := httputil.NewSingleHostReverseProxy(u)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		form, _ := url.ParseQuery(string(b))
		c.mu.Lock()
		c.all = append(c.all, form)
		c.mu.Unlock()
		r.Body = io.NopCloser(bytes.NewReader(b))
		rp.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

func (c *stsCalls) list() []url.Values {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]url.Values(nil), c.all...)
}

// The default chain's web identity (AWS_WEB_IDENTITY_TOKEN_FILE and
// AWS_ROLE_ARN, as EKS IRSA sets them) against kumo's STS, which answers
// AssumeRoleWithWebIdentity with temporary keys without checking the
// token: this shows the token file is read and sent and the keys STS
// gives sign the Secrets Manager requests, not that AWS would accept the
// token.
func TestAWSDefaultChainExchangesAWebIdentityTokenForKeys(t *testing.T) {
	srv := kumotest.Start(t)
	srv.Create("shop/db", `{"password":"web-identity-pw"}`)
	var calls stsCalls
	dir := t.TempDir()
	tok := filepath.Join(dir, "token")
	const jwt = "eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJzeXN0ZW06c2VydmljZWFjY291bnQ6ZmxvdGlsbGEifQ.c2lnbmF0dXJl"
	writeFile(t, tok, jwt) // as Kubernetes writes it: the SDK sends the file as it is
	none := filepath.Join(dir, "none")
	for k, v := range map[string]string{
		"AWS_ACCESS_KEY_ID": "", "AWS_SECRET_ACCESS_KEY": "", "AWS_SESSION_TOKEN": "",
		"AWS_CONFIG_FILE": none, "AWS_SHARED_CREDENTIALS_FILE": none, "AWS_PROFILE": "", "AWS_EC2_METADATA_DISABLED": "true",
		"AWS_CONTAINER_CREDENTIALS_FULL_URI": "", "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI": "",
		"AWS_WEB_IDENTITY_TOKEN_FILE": tok, "AWS_ROLE_ARN": "arn:aws:iam::000000000000:role/flotilla", "AWS_ROLE_SESSION_NAME": "flotilla",
		// The chain's own STS client takes its endpoint from the
		// environment, as the SDK does; the store's requests do not.
		"AWS_ENDPOINT_URL_STS": calls.proxy(t, srv.Endpoint),
	} {
		t.Setenv(k, v)
	}
	ref := secretstore.Ref{Store: "aws", Path: "shop/db", Key: "password"}
	stores, q := awsStores()
	st := awsStore(srv, application.AWSAuth{DefaultChain: true})
	if v, _, err := resolve(t, stores, shopApp(st, "shop/*"), ref); err != nil || v != "web-identity-pw" {
		t.Fatalf("web identity: %q %v", v, err)
	}
	c := calls.list()
	if len(c) != 1 || c[0].Get("Action") != "AssumeRoleWithWebIdentity" || c[0].Get("RoleArn") != "arn:aws:iam::000000000000:role/flotilla" ||
		c[0].Get("WebIdentityToken") != jwt {
		t.Fatalf("STS received %v", c)
	}
	// The Secrets Manager request is signed with the temporary key STS
	// gave (kumo's start with ASIA, as AWS's do), at the store's endpoint.
	if s := q.last(); s.op != "GetSecretValue" || !strings.HasPrefix(s.keyID, "ASIA") || s.host != strings.TrimPrefix(srv.Endpoint, "http://") {
		t.Fatalf("request %+v", s)
	}

	// Without the token file the chain has nothing: the read fails, and
	// nothing is sent to STS or Secrets Manager.
	if err := os.Remove(tok); err != nil {
		t.Fatal(err)
	}
	stores, q = awsStores()
	_, _, err := resolve(t, stores, shopApp(st, "shop/*"), ref)
	if !errors.Is(err, secretstore.ErrUnavailable) || !strings.Contains(err.Error(), `secret store "aws"`) || !strings.Contains(err.Error(), tok) {
		t.Fatalf("no token file: %v", err)
	}
	if n := q.count(""); n != 0 || len(calls.list()) != 1 {
		t.Fatalf("without a token file: %d store requests, %d STS requests", n, len(calls.list()))
	}
}
