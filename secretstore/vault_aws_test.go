package secretstore_test

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/flotilla-gitops/flotilla/application"
	"github.com/flotilla-gitops/flotilla/secretstore"
	"github.com/flotilla-gitops/flotilla/secretstore/ststest"
	"github.com/flotilla-gitops/flotilla/secretstore/vaulttest"
)

// These tests run the real Vault with its real aws auth method (the
// plugin scripts/vault.sh builds), which sends the controller's signed
// request to a stand-in for STS GetCallerIdentity (ststest): AWS itself
// cannot be reached here, and no emulator answers it as Vault requires.

// The controller's AWS identity, an assumed role, and another one.
var (
	controllerRole = ststest.Identity{
		AccessKeyID: "ASIAFLOTILLATEST001", SecretAccessKey: "controller-secret-key-001", SessionToken: "controller-session-token-001",
		Arn: "arn:aws:sts::123456789012:assumed-role/flotilla-controller/i-0abc123", UserID: "AROAFLOTILLATEST0001:i-0abc123", Account: "123456789012",
	}
	ciUser = ststest.Identity{
		AccessKeyID: "AKIACIUSERTEST00001", SecretAccessKey: "ci-secret-key-001",
		Arn: "arn:aws:iam::123456789012:user/ci", UserID: "AIDACIUSERTEST000001", Account: "123456789012",
	}
)

// awsEnv gives the AWS SDK's default chain exactly the keys of id (none
// for a zero id) and nothing else to find: no shared files, no instance
// or container role, no web identity.
func awsEnv(t *testing.T, id ststest.Identity) {
	none := filepath.Join(t.TempDir(), "none")
	for k, v := range map[string]string{
		"AWS_ACCESS_KEY_ID": id.AccessKeyID, "AWS_SECRET_ACCESS_KEY": id.SecretAccessKey, "AWS_SESSION_TOKEN": id.SessionToken,
		"AWS_CONFIG_FILE": none, "AWS_SHARED_CREDENTIALS_FILE": none, "AWS_PROFILE": "", "AWS_EC2_METADATA_DISABLED": "true",
		"AWS_WEB_IDENTITY_TOKEN_FILE": "", "AWS_ROLE_ARN": "", "AWS_CONTAINER_CREDENTIALS_FULL_URI": "", "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI": "",
	} {
		t.Setenv(k, v)
	}
}

func TestVaultAWSLoginIsASignedRequestVaultChecksWithSTS(t *testing.T) {
	srv := vaulttest.StartWithAWSAuth(t, "aws")
	srv.Mount("kv", 2)
	srv.Policy("shop", shopPolicy)
	srv.Write("kv/data/shop/db", true, map[string]any{"password": "aws-login-pw"})
	sts := ststest.Start(t, controllerRole, ciUser)
	ctx := context.Background()
	write := func(p string, body map[string]any) {
		t.Helper()
		if _, err := srv.Client.Logical().WriteWithContext(ctx, p, body); err != nil {
			t.Fatalf("write %s: %v", p, err)
		}
	}
	write("auth/aws/config/client", map[string]any{"sts_endpoint": sts.URL, "iam_server_id_header_value": "vault.test", "max_retries": 0})
	role := func(name, arn, ttl string) {
		write("auth/aws/role/"+name, map[string]any{
			"auth_type": "iam", "bound_iam_principal_arn": []string{arn}, "resolve_aws_unique_ids": false,
			"token_policies": []string{"shop"}, "token_ttl": ttl, "token_max_ttl": ttl,
		})
	}
	role("flotilla", "arn:aws:iam::123456789012:role/flotilla-controller", "1h")
	role("ci-only", "arn:aws:iam::123456789012:user/ci", "1h")
	role("flotilla-short", "arn:aws:iam::123456789012:role/flotilla-controller", "5s")
	ref := secretstore.Ref{Store: "vault", Path: "kv/data/shop/db", Key: "password"}
	login := func(a application.VaultAWS) (string, error) {
		v, _, err := resolve(t, secretstore.New(), shopApp(store(srv, "kv", 2, application.VaultAuth{AWS: &a}), "kv/data/shop/*"), ref)
		return v, err
	}
	noSecrets := func(err error) {
		t.Helper()
		for _, s := range []string{controllerRole.SecretAccessKey, controllerRole.SessionToken, ciUser.SecretAccessKey} {
			if strings.Contains(err.Error(), s) {
				t.Fatalf("error quotes a credential: %v", err)
			}
		}
	}

	// The controller's role logs in and reads; Vault sent STS the request
	// the controller signed, with the header value, for the global host.
	awsEnv(t, controllerRole)
	if v, err := login(application.VaultAWS{Mount: "aws", Role: "flotilla", HeaderValue: "vault.test"}); err != nil || v != "aws-login-pw" {
		t.Fatalf("aws login: %q %v", v, err)
	}
	// Vault asks STS once to resolve the role and once to log in.
	got := sts.Received()
	perLogin := len(got)
	if perLogin == 0 {
		t.Fatal("STS received no request")
	}
	for _, r := range got {
		auth := r.Header.Get("Authorization")
		if r.Status != 200 || r.Host != "sts.amazonaws.com" ||
			!strings.HasPrefix(auth, "AWS4-HMAC-SHA256 Credential="+controllerRole.AccessKeyID+"/") ||
			!strings.Contains(auth, "/us-east-1/sts/aws4_request") || !strings.Contains(auth, "x-vault-aws-iam-server-id") ||
			r.Header.Get("X-Vault-AWS-IAM-Server-ID") != "vault.test" || r.Header.Get("X-Amz-Security-Token") != controllerRole.SessionToken ||
			r.Body != "Action=GetCallerIdentity&Version=2011-06-15" {
			t.Fatalf("STS received %+v", r)
		}
	}

	// A region signs for that region's STS host.
	if v, err := login(application.VaultAWS{Mount: "aws", Role: "flotilla", Region: "eu-central-1", HeaderValue: "vault.test"}); err != nil || v != "aws-login-pw" {
		t.Fatalf("aws login in eu-central-1: %q %v", v, err)
	}
	if r := sts.Received(); len(r) != 2*perLogin || r[len(r)-1].Host != "sts.eu-central-1.amazonaws.com" ||
		!strings.Contains(r[len(r)-1].Header.Get("Authorization"), "/eu-central-1/sts/aws4_request") {
		t.Fatalf("STS received %+v", r)
	}

	// Vault refuses what the Vault's header value does not match ...
	_, err := login(application.VaultAWS{Mount: "aws", Role: "flotilla", HeaderValue: "another-vault"})
	if !errors.Is(err, secretstore.ErrUnavailable) || !strings.Contains(err.Error(), `secret store "vault"`) ||
		!strings.Contains(err.Error(), "login at auth/aws") || !strings.Contains(err.Error(), "X-Vault-AWS-IAM-Server-ID") {
		t.Fatalf("wrong header value: %v", err)
	}
	// ... a role not bound to the caller's ARN ...
	_, err = login(application.VaultAWS{Mount: "aws", Role: "ci-only", HeaderValue: "vault.test"})
	if !errors.Is(err, secretstore.ErrUnavailable) || !strings.Contains(err.Error(), `secret store "vault"`) ||
		!strings.Contains(err.Error(), "login at auth/aws") || !strings.Contains(err.Error(), `does not belong to the role "ci-only"`) {
		t.Fatalf("role not bound to the caller: %v", err)
	}
	noSecrets(err)
	// ... and, through STS, a request not signed with the caller's key.
	forged := controllerRole
	forged.SecretAccessKey = "not-the-controller-secret-key"
	awsEnv(t, forged)
	_, err = login(application.VaultAWS{Mount: "aws", Role: "flotilla", HeaderValue: "vault.test"})
	if !errors.Is(err, secretstore.ErrUnavailable) || !strings.Contains(err.Error(), "login at auth/aws") || !strings.Contains(err.Error(), "SignatureDoesNotMatch") {
		t.Fatalf("wrong secret key: %v", err)
	}
	noSecrets(err)
	if r := sts.Received(); r[len(r)-1].Status != 403 {
		t.Fatalf("STS answered the forged request with %d", r[len(r)-1].Status)
	}

	// Without AWS credentials nothing is sent, and the error says so.
	awsEnv(t, ststest.Identity{})
	before := len(sts.Received())
	_, err = login(application.VaultAWS{Mount: "aws", Role: "flotilla", HeaderValue: "vault.test"})
	if !errors.Is(err, secretstore.ErrUnavailable) || !strings.Contains(err.Error(), `secret store "vault"`) ||
		!strings.Contains(err.Error(), "auth.aws: no AWS credentials") {
		t.Fatalf("no credentials: %v", err)
	}
	if n := len(sts.Received()); n != before {
		t.Fatalf("STS received %d requests without credentials", n-before)
	}

	// A login token is taken again, with a new signature, before it
	// expires (at four fifths of its TTL).
	awsEnv(t, controllerRole)
	stores := secretstore.New()
	app := shopApp(store(srv, "kv", 2, application.VaultAuth{AWS: &application.VaultAWS{Mount: "aws", Role: "flotilla-short", HeaderValue: "vault.test"}}), "kv/data/shop/*")
	before = len(sts.Received())
	deadline := time.Now().Add(90 * time.Second)
	for len(sts.Received()) < before+2*perLogin {
		if v, _, err := resolve(t, stores, app, ref); err != nil || v != "aws-login-pw" {
			t.Fatalf("read with a short-lived login: %q %v", v, err)
		}
		if time.Now().After(deadline) {
			t.Fatalf("no second login within 90s of a 5s token: STS received %d requests, %d a login", len(sts.Received())-before, perLogin)
		}
		time.Sleep(200 * time.Millisecond)
	}
}
