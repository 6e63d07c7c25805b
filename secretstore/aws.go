package secretstore

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"slices"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/ratelimit"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"
	"github.com/aws/smithy-go"

	"github.com/flotilla-gitops/flotilla/application"
)

// awsReader reads AWS Secrets Manager with the official SDK. A reference's
// path is the secret's name or ARN; its key, when set, names a string in
// the JSON object the SecretString holds, and when empty takes the whole
// SecretString (or, for a secret without one, the SecretBinary).
type awsReader struct {
	store  application.SecretStore
	client *secretsmanager.Client
}

// currentStage is the staging label of the version GetSecretValue returns
// by default.
const currentStage = "AWSCURRENT"

// defaultChain is the AWS SDK's default credential chain (environment,
// web identity token file, shared files, ECS or EC2 role), for region. Only
// the credentials are taken from the host; where a request goes is the
// store's declaration alone. Nothing is resolved over the network here:
// the chain's providers are asked at the first request.
func defaultChain(region string) (aws.CredentialsProvider, error) {
	lc, err := config.LoadDefaultConfig(context.Background(), config.WithRegion(region))
	if err != nil {
		return nil, err
	}
	return lc.Credentials, nil
}

// newAWSReader makes the client. wrap, when set, wraps the HTTP transport
// (tests count the requests the server gets with it).
//
// The client is assembled from the store's declaration alone, not from
// config.LoadDefaultConfig: that would let the controller's AWS_REGION,
// AWS_ENDPOINT_URL*, AWS_CA_BUNDLE, retry or logging settings steer a store
// the applications file defines. Only auth.defaultChain consults the
// environment, and only for credentials.
func newAWSReader(s application.SecretStore, wrap func(http.RoundTripper) http.RoundTripper) (reader, error) {
	a := s.AWS
	if a == nil {
		return nil, fmt.Errorf("store %q has no aws settings", s.Name)
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.TLSClientConfig = &tls.Config{MinVersion: tls.VersionTLS12}
	if a.CACertFile != "" {
		pem, err := os.ReadFile(a.CACertFile)
		if err != nil {
			return nil, fmt.Errorf("store %q: caCertFile: %w", s.Name, err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("store %q: caCertFile %s holds no PEM certificate", s.Name, a.CACertFile)
		}
		tr.TLSClientConfig.RootCAs = pool
	}
	var rt http.RoundTripper = tr
	if wrap != nil {
		rt = wrap(rt)
	}
	var creds aws.CredentialsProvider = fileCredentials{a.Auth}
	if a.Auth.DefaultChain {
		c, err := defaultChain(a.Region)
		if err != nil {
			return nil, fmt.Errorf("store %q: auth.defaultChain: %w", s.Name, err)
		}
		creds = c
	}
	opts := secretsmanager.Options{
		Region:      a.Region,
		HTTPClient:  &http.Client{Transport: rt, Timeout: requestTimeout},
		Credentials: creds,
		// One retry, as for Vault, and no client-side retry quota: a store
		// down for long must keep failing with its own error, not the
		// quota's.
		Retryer: retry.NewStandard(func(o *retry.StandardOptions) {
			o.MaxAttempts = 2
			o.RateLimiter = ratelimit.None
		}),
	}
	if a.Endpoint != "" {
		opts.BaseEndpoint = aws.String(a.Endpoint)
	}
	return &awsReader{store: s, client: secretsmanager.New(opts)}, nil
}

func (r *awsReader) read(ctx context.Context, path, key string) (Value, error) {
	return r.readVersion(ctx, path, key, "")
}

// readAt reads the version a record names by its id, for a rollback (see
// Pinned). Secrets Manager keeps a version while a staging label (such as
// AWSPREVIOUS) holds it; one it dropped is an error naming the id.
func (r *awsReader) readAt(ctx context.Context, path, key string, at Pin) (Value, error) {
	if at.VersionID == "" {
		return Value{}, errNoPastVersions
	}
	return r.readVersion(ctx, path, key, at.VersionID)
}

// readVersion reads the version id names, AWSCURRENT when id is "".
func (r *awsReader) readVersion(ctx context.Context, path, key, id string) (Value, error) {
	in := &secretsmanager.GetSecretValueInput{SecretId: aws.String(path)}
	if id != "" {
		in.VersionId = aws.String(id)
	}
	out, err := r.client.GetSecretValue(ctx, in)
	if err != nil {
		return Value{}, awsError("GetSecretValue", err)
	}
	v := Value{VersionID: aws.ToString(out.VersionId)}
	switch {
	case key == "" && out.SecretString != nil:
		v.Data = []byte(*out.SecretString)
	case key == "" && out.SecretBinary != nil:
		v.Data = out.SecretBinary
	case key == "":
		return Value{}, fmt.Errorf("%w: the secret's current version has no value", ErrNoValue)
	case out.SecretString == nil:
		return Value{}, fmt.Errorf("%w: the secret holds binary data, which has no keys; leave key empty to take it whole", ErrNoValue)
	default:
		s, err := jsonKey(*out.SecretString, key)
		if err != nil {
			return Value{}, err
		}
		v.Data = []byte(s)
	}
	return v, nil
}

// jsonKey returns the string at key in the JSON object doc. Its errors
// never quote doc: a parse error's message can carry a character of it.
func jsonKey(doc, key string) (string, error) {
	var obj map[string]json.RawMessage
	if err := json.Unmarshal([]byte(doc), &obj); err != nil || obj == nil {
		return "", fmt.Errorf("%w: the SecretString is not a JSON object, so it has no key %q; leave key empty to take it whole", ErrNoValue, key)
	}
	raw, ok := obj[key]
	if !ok {
		return "", fmt.Errorf("%w: the secret has no key %q", ErrNoValue, key)
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		// The type only: the value may be secret whatever its type.
		return "", fmt.Errorf("%w: key %q holds a JSON %s, not a string", ErrNoValue, key, jsonKind(raw))
	}
	return s, nil
}

func jsonKind(raw json.RawMessage) string {
	if len(raw) == 0 {
		return "nothing"
	}
	switch raw[0] {
	case '{':
		return "object"
	case '[':
		return "array"
	case 't', 'f':
		return "boolean"
	case 'n':
		return "null"
	}
	return "number"
}

// version returns the version id that holds the AWSCURRENT label, from
// DescribeSecret (metadata only, never the value). ok is false when the
// controller may not describe the secret (a policy granting only
// GetSecretValue: the value is read instead) or the secret is scheduled
// for deletion (the read reports it).
func (r *awsReader) version(ctx context.Context, path string) (Value, bool, error) {
	out, err := r.client.DescribeSecret(ctx, &secretsmanager.DescribeSecretInput{SecretId: aws.String(path)})
	var ae smithy.APIError
	if errors.As(err, &ae) && ae.ErrorCode() == "AccessDeniedException" {
		return Value{}, false, nil
	}
	if err != nil {
		return Value{}, false, awsError("DescribeSecret", err)
	}
	if out.DeletedDate != nil {
		return Value{}, false, nil
	}
	for id, stages := range out.VersionIdsToStages {
		if slices.Contains(stages, currentStage) {
			return Value{VersionID: id}, true, nil
		}
	}
	return Value{}, false, nil
}

// fileCredentials reads an access key from the files auth names at every
// request, so a rotated key is used without a restart; the controller's
// AWS_* environment and shared files are never consulted.
type fileCredentials struct{ auth application.AWSAuth }

func (f fileCredentials) Retrieve(context.Context) (aws.Credentials, error) {
	id, err := readCredential(f.auth.AccessKeyIDFile, "auth.accessKeyIDFile")
	if err != nil {
		return aws.Credentials{}, err
	}
	key, err := readCredential(f.auth.SecretAccessKeyFile, "auth.secretAccessKeyFile")
	if err != nil {
		return aws.Credentials{}, err
	}
	c := aws.Credentials{AccessKeyID: id, SecretAccessKey: key, Source: "flotilla applications file"}
	if f.auth.SessionTokenFile != "" {
		if c.SessionToken, err = readCredential(f.auth.SessionTokenFile, "auth.sessionTokenFile"); err != nil {
			return aws.Credentials{}, err
		}
	}
	return c, nil
}

// awsError rewrites an SDK error into one that names the operation, AWS's
// error code and message, and never a response body the SDK could not
// parse. A missing secret is ErrNoValue, anything else ErrUnavailable.
func awsError(op string, err error) error {
	var ae smithy.APIError
	if errors.As(err, &ae) {
		return &awsAPIError{op: op, code: ae.ErrorCode(), msg: ae.ErrorMessage()}
	}
	if errors.Is(err, ErrUnavailable) || errors.Is(err, ErrNoValue) {
		// A credential file that could not be read: the SDK's chain of
		// messages names the operation and the file.
		return err
	}
	var de *smithy.DeserializationError
	if errors.As(err, &de) {
		return fmt.Errorf("%w: %s: the store's answer could not be read", ErrUnavailable, op)
	}
	return fmt.Errorf("%w: %v", ErrUnavailable, err)
}

// awsAPIError is Secrets Manager's refusal: its error code and message.
type awsAPIError struct {
	op, code, msg string
}

func (e *awsAPIError) Error() string {
	if e.msg == "" {
		return e.op + ": " + e.code
	}
	return e.op + ": " + e.code + ": " + e.msg
}

// Unwrap classifies the refusal: a secret that does not exist (or whose
// version does not) is a missing value, anything else a store the
// controller cannot use right now.
func (e *awsAPIError) Unwrap() error {
	if e.code == "ResourceNotFoundException" {
		return ErrNoValue
	}
	return ErrUnavailable
}
