// Package kumotest runs kumo, an AWS emulator written in Go, on loopback
// for tests of the AWS Secrets Manager store: the binary scripts/kumo.sh
// builds from kumo's Go module, named by FLOTILLA_KUMO. With
// FLOTILLA_REQUIRE_AWSEMU=1 (as scripts/test.sh sets it) a missing binary
// fails the test instead of skipping it.
//
// kumo serves Secrets Manager's API as AWS documents it, in memory; it
// does not check request signatures or IAM policies, so tests of who may
// read what rely on the controller's own grant check, not on AWS's.
package kumotest

import (
	"context"
	"net"
	"os"
	"os/exec"
	"strconv"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"

	"github.com/flotilla-gitops/flotilla/internal/testproc"
)

// Region is the region the tests declare; kumo accepts any.
const Region = "us-east-1"

// Server is a running kumo.
type Server struct {
	// Endpoint is its URL, http://127.0.0.1:<port>.
	Endpoint string
	// Client is a Secrets Manager client for the test's own setup.
	Client *secretsmanager.Client
	t      testing.TB
}

// Start runs $FLOTILLA_KUMO on a free loopback port and waits until it
// answers. It is stopped when the test ends; its log is shown if the test
// failed.
func Start(t testing.TB) *Server {
	t.Helper()
	bin := os.Getenv("FLOTILLA_KUMO")
	if bin == "" {
		if os.Getenv("FLOTILLA_REQUIRE_AWSEMU") == "1" {
			t.Fatal("FLOTILLA_REQUIRE_AWSEMU=1 but FLOTILLA_KUMO names no kumo binary (scripts/kumo.sh builds one)")
		}
		t.Skip("FLOTILLA_KUMO names no kumo binary (eval \"$(scripts/kumo.sh)\")")
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	home := t.TempDir()
	cmd := exec.Command(bin, "--host", "127.0.0.1", "--port", strconv.Itoa(port))
	// No KUMO_DATA_DIR: nothing is persisted. No AWS_* settings either.
	cmd.Env = []string{"HOME=" + home, "PATH=" + os.Getenv("PATH")}
	cmd.Dir = home
	endpoint := "http://127.0.0.1:" + strconv.Itoa(port)
	testproc.Start(t, "kumo", cmd).WaitHTTP(t, endpoint+"/health", 60*time.Second, testproc.OK)
	c := secretsmanager.New(secretsmanager.Options{
		Region:       Region,
		BaseEndpoint: aws.String(endpoint),
		Credentials:  credentials.NewStaticCredentialsProvider("test-setup-key", "test-setup-secret", ""),
	})
	return &Server{Endpoint: endpoint, Client: c, t: t}
}

// Create creates the secret name with a string value and returns its ARN
// and first version id.
func (s *Server) Create(name, value string) (arn, version string) {
	s.t.Helper()
	out, err := s.Client.CreateSecret(context.Background(), &secretsmanager.CreateSecretInput{
		Name: aws.String(name), SecretString: aws.String(value),
	})
	if err != nil {
		s.t.Fatalf("create secret %s: %v", name, err)
	}
	return aws.ToString(out.ARN), aws.ToString(out.VersionId)
}

// CreateBinary creates the secret name with a binary value.
func (s *Server) CreateBinary(name string, value []byte) (arn, version string) {
	s.t.Helper()
	out, err := s.Client.CreateSecret(context.Background(), &secretsmanager.CreateSecretInput{
		Name: aws.String(name), SecretBinary: value,
	})
	if err != nil {
		s.t.Fatalf("create secret %s: %v", name, err)
	}
	return aws.ToString(out.ARN), aws.ToString(out.VersionId)
}

// Put writes a new current version of the secret, as a rotation does,
// and returns its version id.
func (s *Server) Put(name, value string) string {
	s.t.Helper()
	out, err := s.Client.PutSecretValue(context.Background(), &secretsmanager.PutSecretValueInput{
		SecretId: aws.String(name), SecretString: aws.String(value),
	})
	if err != nil {
		s.t.Fatalf("put secret value %s: %v", name, err)
	}
	return aws.ToString(out.VersionId)
}

// Delete deletes the secret: at once with force, else scheduled after
// AWS's default recovery window (the secret can no longer be read).
func (s *Server) Delete(name string, force bool) {
	s.t.Helper()
	in := &secretsmanager.DeleteSecretInput{SecretId: aws.String(name)}
	if force {
		in.ForceDeleteWithoutRecovery = aws.Bool(true)
	}
	_, err := s.Client.DeleteSecret(context.Background(), in)
	if err != nil {
		s.t.Fatalf("delete secret %s: %v", name, err)
	}
}
