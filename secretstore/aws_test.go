package secretstore_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/flotilla-gitops/flotilla/application"
	"github.com/flotilla-gitops/flotilla/secretstore"
	"github.com/flotilla-gitops/flotilla/secretstore/kumotest"
)

// These tests run kumo, an AWS emulator (scripts/kumo.sh), not AWS.

// sent is one request the AWS reader made: its operation (X-Amz-Target),
// host, and the access key id and region of its signature.
type sent struct {
	op, host, keyID, region string
}

// requests records what the AWS readers send. It forwards a request only
// to a loopback address (kumo); any other is recorded and not sent.
type requests struct {
	mu  sync.Mutex
	all []sent
}

func (q *requests) wrap(next http.RoundTripper) http.RoundTripper {
	return roundTripper(func(r *http.Request) (*http.Response, error) {
		s := sent{op: strings.TrimPrefix(r.Header.Get("X-Amz-Target"), "secretsmanager."), host: r.URL.Host}
		// Authorization: AWS4-HMAC-SHA256 Credential=<key id>/<date>/<region>/secretsmanager/aws4_request, ...
		if _, c, ok := strings.Cut(r.Header.Get("Authorization"), "Credential="); ok {
			c, _, _ = strings.Cut(c, ",")
			if f := strings.Split(c, "/"); len(f) == 5 {
				s.keyID, s.region = f[0], f[2]
			}
		}
		q.mu.Lock()
		q.all = append(q.all, s)
		q.mu.Unlock()
		if ip := net.ParseIP(r.URL.Hostname()); ip == nil || !ip.IsLoopback() {
			return nil, fmt.Errorf("test transport: not sent to %s", r.URL.Host)
		}
		return next.RoundTrip(r)
	})
}

type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// count returns how many requests of op were sent ("" for all).
func (q *requests) count(op string) int {
	q.mu.Lock()
	defer q.mu.Unlock()
	n := 0
	for _, s := range q.all {
		if op == "" || s.op == op {
			n++
		}
	}
	return n
}

func (q *requests) last() sent {
	q.mu.Lock()
	defer q.mu.Unlock()
	if len(q.all) == 0 {
		return sent{}
	}
	return q.all[len(q.all)-1]
}

// keyFiles writes an access key to two files and returns the auth naming
// them.
func keyFiles(t *testing.T, id, secret string) application.AWSAuth {
	t.Helper()
	dir := t.TempDir()
	a := application.AWSAuth{AccessKeyIDFile: filepath.Join(dir, "key-id"), SecretAccessKeyFile: filepath.Join(dir, "secret-key")}
	writeFile(t, a.AccessKeyIDFile, id+"\n")
	writeFile(t, a.SecretAccessKeyFile, secret+"\n")
	return a
}

func writeFile(t *testing.T, f, body string) {
	t.Helper()
	if err := os.WriteFile(f, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
}

func awsStore(srv *kumotest.Server, auth application.AWSAuth) application.SecretStore {
	return application.SecretStore{
		Name:         "aws",
		AWS:          &application.AWSStore{Region: kumotest.Region, Endpoint: srv.Endpoint, Auth: auth},
		PollInterval: application.Duration{Duration: time.Nanosecond}, // every resolution asks the store
	}
}

func awsStores() (*secretstore.Stores, *requests) {
	s, q := secretstore.New(), &requests{}
	secretstore.WithAWSTransport(s, q.wrap)
	return s, q
}

func TestAWSReadsAJSONKeyOrTheWholeValue(t *testing.T) {
	srv := kumotest.Start(t)
	_, v1 := srv.Create("shop/db", `{"password":"aws-pw-1","user":"db-user-77","port":5432}`)
	srv.Create("shop/token", "aws-whole-token-1")
	srv.CreateBinary("shop/cert", []byte{0, 1, 2, 0xff})
	otherARN, _ := srv.Create("other/db", `{"password":"other-team-pw"}`)

	st := awsStore(srv, keyFiles(t, "AKIDFILE0001", "file-secret-0001"))
	stores, q := awsStores()
	app := shopApp(st, "shop/*")
	ref := func(path, key string) secretstore.Ref { return secretstore.Ref{Store: "aws", Path: path, Key: key} }

	v, u, err := resolve(t, stores, app, ref("shop/db", "password"))
	if err != nil || v != "aws-pw-1" || u.VersionID != v1 || u.Version != 0 {
		t.Fatalf("json key: %q %+v %v (created version %s)", v, u, err, v1)
	}
	if s := q.last(); s.keyID != "AKIDFILE0001" || s.region != kumotest.Region || s.op != "GetSecretValue" {
		t.Fatalf("request %+v", s)
	}
	// No key: the whole SecretString, or the SecretBinary.
	if v, _, err := resolve(t, stores, app, ref("shop/token", "")); err != nil || v != "aws-whole-token-1" {
		t.Fatalf("whole string: %q %v", v, err)
	}
	if v, _, err := resolve(t, stores, app, ref("shop/cert", "")); err != nil || v != "\x00\x01\x02\xff" {
		t.Fatalf("whole binary: %q %v", v, err)
	}

	// Errors name the store, path and key, and never a value.
	for _, tc := range []struct {
		name string
		ref  secretstore.Ref
		want string
	}{
		{"missing key", ref("shop/db", "nope"), `no key "nope"`},
		{"key of another type", ref("shop/db", "port"), `key "port" holds a JSON number, not a string`},
		{"key in a plain string", ref("shop/token", "password"), "not a JSON object"},
		{"key in binary data", ref("shop/cert", "password"), "binary data"},
		{"missing secret", ref("shop/gone", "password"), "ResourceNotFoundException"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := resolve(t, stores, app, tc.ref)
			if !errors.Is(err, secretstore.ErrNoValue) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err %v, want ErrNoValue with %q", err, tc.want)
			}
			name := fmt.Sprintf(`secret store "aws" path %q key %q not read`, tc.ref.Path, tc.ref.Key)
			if !strings.Contains(err.Error(), name) {
				t.Fatalf("err %v does not name %s", err, name)
			}
			for _, secret := range []string{"aws-pw-1", "db-user-77", "5432", "aws-whole-token", "file-secret-0001"} {
				if strings.Contains(err.Error(), secret) {
					t.Fatalf("err quotes %q: %v", secret, err)
				}
			}
		})
	}

	// By ARN, when the grant names ARNs.
	arnApp := shopApp(st, "arn:aws:secretsmanager:*:*:secret:other/*")
	if v, _, err := resolve(t, stores, arnApp, ref(otherARN, "password")); err != nil || v != "other-team-pw" {
		t.Fatalf("by ARN: %q %v", v, err)
	}
	// A grant of names does not reach a secret by ARN.
	before := q.count("")
	if _, _, err := resolve(t, stores, app, ref(otherARN, "password")); !errors.Is(err, secretstore.ErrNotGranted) {
		t.Fatalf("ARN outside the grant: %v", err)
	}
	if n := q.count(""); n != before {
		t.Fatalf("a refused reference sent %d requests", n-before)
	}
}

func TestAWSRotationReadsTheValueOnlyWhenTheVersionMoved(t *testing.T) {
	srv := kumotest.Start(t)
	_, v1 := srv.Create("shop/db", `{"password":"rot-pw-1"}`)
	st := awsStore(srv, keyFiles(t, "AKIDROT", "rot-secret"))
	stores, q := awsStores()
	app := shopApp(st, "shop/*")
	ref := secretstore.Ref{Store: "aws", Path: "shop/db", Key: "password"}

	v, u1, err := resolve(t, stores, app, ref)
	if err != nil || v != "rot-pw-1" || u1.VersionID != v1 {
		t.Fatalf("first: %q %+v %v", v, u1, err)
	}
	if q.count("GetSecretValue") != 1 || q.count("DescribeSecret") != 0 {
		t.Fatalf("first resolution sent %+v", q.all)
	}
	// Unchanged: the version is asked, the value is not read again.
	for range 3 {
		if v, u, err := resolve(t, stores, app, ref); err != nil || v != "rot-pw-1" || !u.Same(u1) || u.VersionID != v1 || !u.Rotated.IsZero() {
			t.Fatalf("again: %q %+v %v", v, u, err)
		}
	}
	if g, d := q.count("GetSecretValue"), q.count("DescribeSecret"); g != 1 || d != 3 {
		t.Fatalf("unchanged secret: %d GetSecretValue, %d DescribeSecret; want 1 and 3", g, d)
	}
	// Rotated: a new AWSCURRENT version, so the value is read once more.
	v2 := srv.Put("shop/db", `{"password":"rot-pw-2"}`)
	v, u2, err := resolve(t, stores, app, ref)
	if err != nil || v != "rot-pw-2" || u2.VersionID != v2 || v2 == v1 || u2.Same(u1) || u2.Rotated.IsZero() {
		t.Fatalf("rotated: %q %+v %v", v, u2, err)
	}
	if g, d := q.count("GetSecretValue"), q.count("DescribeSecret"); g != 2 || d != 4 {
		t.Fatalf("after the rotation: %d GetSecretValue, %d DescribeSecret; want 2 and 4", g, d)
	}
	// The tag, and so the swarm secret's name, follows the version.
	tag := func() string {
		_, tg, err := stores.For(context.Background(), app).Resolve("db_password", ref)
		if err != nil {
			t.Fatal(err)
		}
		return tg
	}
	t2 := tag()
	v3 := srv.Put("shop/db", `{"password":"rot-pw-3"}`)
	if t3 := tag(); t3 == t2 || !strings.HasPrefix(t3, "version:") || strings.Contains(t3, v3) {
		t.Fatalf("tags %s then %s", t2, t3)
	}
	// A secret scheduled for deletion, then deleted, fails the pass: its
	// unchanged AWSCURRENT version does not keep the cached value served.
	srv.Delete("shop/db", false)
	if _, _, err := resolve(t, stores, app, ref); !errors.Is(err, secretstore.ErrUnavailable) || !strings.Contains(err.Error(), "InvalidRequestException") || strings.Contains(err.Error(), "rot-pw") {
		t.Fatalf("scheduled for deletion: %v", err)
	}
	srv.Delete("shop/db", true)
	if _, _, err := resolve(t, stores, app, ref); !errors.Is(err, secretstore.ErrNoValue) || strings.Contains(err.Error(), "rot-pw") {
		t.Fatalf("deleted: %v", err)
	}
}

func TestAWSGrantIsCheckedBeforeAnyRequest(t *testing.T) {
	srv := kumotest.Start(t)
	srv.Create("other/db", `{"password":"other-team-pw"}`)
	st := awsStore(srv, keyFiles(t, "AKIDGRANT", "grant-secret"))
	stores, q := awsStores()
	for _, tc := range []struct {
		name string
		app  application.Application
		ref  secretstore.Ref
	}{
		{"path outside the grant", shopApp(st, "shop/*"), secretstore.Ref{Store: "aws", Path: "other/db", Key: "password"}},
		{"glob does not cross /", shopApp(st, "*"), secretstore.Ref{Store: "aws", Path: "other/db", Key: "password"}},
		{"unclean path", shopApp(st, "shop/*"), secretstore.Ref{Store: "aws", Path: "shop/../other/db", Key: "password"}},
		{"store not granted", application.Application{Name: "shop"}, secretstore.Ref{Store: "aws", Path: "other/db", Key: "password"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := resolve(t, stores, tc.app, tc.ref)
			if !errors.Is(err, secretstore.ErrNotGranted) || !strings.Contains(err.Error(), `application "shop"`) || !strings.Contains(err.Error(), `secret store "aws"`) {
				t.Fatalf("err %v", err)
			}
		})
	}
	if n := q.count(""); n != 0 {
		t.Fatalf("refused references sent %d requests: %+v", n, q.all)
	}
}

func TestAWSCredentialsAndEndpointComeFromTheFileNotTheEnvironment(t *testing.T) {
	srv := kumotest.Start(t)
	srv.Create("shop/db", `{"password":"env-pw-1"}`)
	// The controller's own AWS settings, all pointing elsewhere.
	t.Setenv("AWS_ACCESS_KEY_ID", "AKIDFROMENV")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "env-secret-key")
	t.Setenv("AWS_REGION", "eu-west-3")
	t.Setenv("AWS_DEFAULT_REGION", "eu-west-3")
	t.Setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:1")
	t.Setenv("AWS_ENDPOINT_URL_SECRETS_MANAGER", "http://127.0.0.1:1")
	t.Setenv("AWS_CONFIG_FILE", filepath.Join(t.TempDir(), "none"))
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", filepath.Join(t.TempDir(), "none"))
	ref := secretstore.Ref{Store: "aws", Path: "shop/db", Key: "password"}
	host := strings.TrimPrefix(srv.Endpoint, "http://")

	// Key files: their key signs, in the store's region, at its endpoint.
	auth := keyFiles(t, "AKIDFILE1", "file-secret-1")
	stores, q := awsStores()
	st := awsStore(srv, auth)
	if v, _, err := resolve(t, stores, shopApp(st, "shop/*"), ref); err != nil || v != "env-pw-1" {
		t.Fatalf("key files: %q %v", v, err)
	}
	if s := q.last(); s.keyID != "AKIDFILE1" || s.region != kumotest.Region || s.host != host {
		t.Fatalf("key files: request %+v", s)
	}
	// A rotated key file is used at the next request, without a restart.
	writeFile(t, auth.AccessKeyIDFile, "AKIDFILE2\n")
	if _, _, err := resolve(t, stores, shopApp(st, "shop/*"), ref); err != nil || q.last().keyID != "AKIDFILE2" {
		t.Fatalf("rotated key file: %v, request %+v", err, q.last())
	}
	// A missing key file fails naming the field, quoting no key.
	if err := os.Remove(auth.SecretAccessKeyFile); err != nil {
		t.Fatal(err)
	}
	_, _, err := resolve(t, secretstore.New(), shopApp(st, "shop/*"), ref)
	if !errors.Is(err, secretstore.ErrUnavailable) || !strings.Contains(err.Error(), "auth.secretAccessKeyFile") || strings.Contains(err.Error(), "AKIDFILE") || strings.Contains(err.Error(), "env-secret") {
		t.Fatalf("missing key file: %v", err)
	}

	// defaultChain: the environment's key (first in the SDK's chain), still
	// in the store's region and at its endpoint.
	stores, q = awsStores()
	chain := awsStore(srv, application.AWSAuth{DefaultChain: true})
	if v, _, err := resolve(t, stores, shopApp(chain, "shop/*"), ref); err != nil || v != "env-pw-1" {
		t.Fatalf("default chain: %q %v", v, err)
	}
	if s := q.last(); s.keyID != "AKIDFROMENV" || s.region != kumotest.Region || s.host != host {
		t.Fatalf("default chain: request %+v", s)
	}

	// No endpoint in the file: the region's public endpoint, not the
	// environment's (the test transport does not send it).
	stores, q = awsStores()
	public := awsStore(srv, application.AWSAuth{DefaultChain: true})
	public.AWS.Endpoint = ""
	if _, _, err := resolve(t, stores, shopApp(public, "shop/*"), ref); !errors.Is(err, secretstore.ErrUnavailable) {
		t.Fatalf("public endpoint: %v", err)
	}
	if s := q.last(); s.host != "secretsmanager."+kumotest.Region+".amazonaws.com" {
		t.Fatalf("no endpoint in the file: the request went to %q", s.host)
	}
}
