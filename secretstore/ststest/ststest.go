// Package ststest is a stand-in for one AWS API, STS GetCallerIdentity, on
// loopback, for tests of Vault's aws auth method. It is Go code written for
// these tests, not a recording of AWS: its answers have the shape AWS's
// API reference documents for GetCallerIdentity (XML in the 2011-06-15
// namespace, served as text/xml), which is what Vault's aws auth method
// parses. AWS cannot be reached from the test machines, and the AWS
// emulator the other AWS tests use answers in a form Vault refuses (see
// docs/secrets.md).
//
// Unlike that emulator it checks the request's SigV4 signature against the
// secret key of the identity it knows by access key id, so a login whose
// signature is wrong, or whose signed headers were changed on the way
// through Vault, is refused as STS refuses it.
package ststest

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/xml"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
)

// Identity is a caller the server knows: the keys it signs with and who
// STS says it is.
type Identity struct {
	AccessKeyID, SecretAccessKey, SessionToken string
	// Arn, UserID and Account are GetCallerIdentity's answer, such as
	// arn:aws:sts::123456789012:assumed-role/flotilla/i-0abc,
	// AROAEXAMPLEID:i-0abc and 123456789012.
	Arn, UserID, Account string
}

// Request is one request the server received.
type Request struct {
	// Host is the Host header: the STS host the caller signed for.
	Host   string
	Header http.Header
	Body   string
	// Status is what the server answered.
	Status int
}

// Server is a running stand-in.
type Server struct {
	// URL is its address, http://127.0.0.1:<port>, for Vault's
	// sts_endpoint.
	URL string

	mu       sync.Mutex
	ids      map[string]Identity
	received []Request
}

// Start serves the identities on loopback until the test ends.
func Start(t testing.TB, ids ...Identity) *Server {
	t.Helper()
	s := &Server{ids: map[string]Identity{}}
	for _, id := range ids {
		s.ids[id.AccessKeyID] = id
	}
	// A plain handler, not a ServeMux: Vault sends the request to
	// "<sts_endpoint>/" + "/", which a mux would redirect.
	srv := httptest.NewServer(http.HandlerFunc(s.serve))
	t.Cleanup(srv.Close)
	s.URL = srv.URL
	return s
}

// Received returns the requests received so far.
func (s *Server) Received() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request(nil), s.received...)
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(io.LimitReader(r.Body, 1<<16))
	status, answer := s.answer(r, string(b))
	s.mu.Lock()
	s.received = append(s.received, Request{Host: r.Host, Header: r.Header.Clone(), Body: string(b), Status: status})
	s.mu.Unlock()
	w.Header().Set("Content-Type", "text/xml")
	w.WriteHeader(status)
	_, _ = io.WriteString(w, answer)
}

// answer checks the request as STS would (action, known key, signature)
// and returns the status and body to send.
func (s *Server) answer(r *http.Request, body string) (int, string) {
	if r.Method != http.MethodPost || !strings.Contains(body, "Action=GetCallerIdentity") {
		return http.StatusBadRequest, stsError("Sender", "InvalidAction", "only POST GetCallerIdentity is served here")
	}
	auth := r.Header.Get("Authorization")
	keyID, region, ok := credentialScope(auth)
	if !ok {
		return http.StatusForbidden, stsError("Sender", "MissingAuthenticationToken", "Request is missing Authentication Token")
	}
	s.mu.Lock()
	id, known := s.ids[keyID]
	s.mu.Unlock()
	if !known || r.Header.Get("X-Amz-Security-Token") != id.SessionToken {
		return http.StatusForbidden, stsError("Sender", "InvalidClientTokenId", "The security token included in the request is invalid.")
	}
	if resign(r, body, id, region) != auth {
		return http.StatusForbidden, stsError("Sender", "SignatureDoesNotMatch",
			"The request signature we calculated does not match the signature you provided.")
	}
	return http.StatusOK, fmt.Sprintf(`<GetCallerIdentityResponse xmlns="https://sts.amazonaws.com/doc/2011-06-15/">
  <GetCallerIdentityResult>
    <Arn>%s</Arn>
    <UserId>%s</UserId>
    <Account>%s</Account>
  </GetCallerIdentityResult>
  <ResponseMetadata>
    <RequestId>%s</RequestId>
  </ResponseMetadata>
</GetCallerIdentityResponse>
`, xmlText(id.Arn), xmlText(id.UserID), xmlText(id.Account), requestID())
}

// credentialScope reads the access key id and region of an Authorization
// header: AWS4-HMAC-SHA256 Credential=<key>/<date>/<region>/sts/aws4_request, ...
func credentialScope(auth string) (keyID, region string, ok bool) {
	rest, found := strings.CutPrefix(auth, "AWS4-HMAC-SHA256 Credential=")
	if !found {
		return "", "", false
	}
	scope, _, _ := strings.Cut(rest, ",")
	f := strings.Split(scope, "/")
	if len(f) != 5 || f[3] != "sts" || f[4] != "aws4_request" {
		return "", "", false
	}
	return f[0], f[2], true
}

// resign signs the received request again with the identity's secret key,
// over the headers the caller listed as signed, for the host and path the
// caller addressed, at the time it stated; the result equals the received
// Authorization header only if the caller held that key and nothing signed
// was changed.
func resign(r *http.Request, body string, id Identity, region string) string {
	when, err := time.Parse("20060102T150405Z", r.Header.Get("X-Amz-Date"))
	if err != nil {
		return ""
	}
	// Vault joins its sts_endpoint and the request's path with a "/".
	u := "https://" + r.Host + path.Clean("/"+r.URL.Path)
	if r.URL.RawQuery != "" {
		u += "?" + r.URL.RawQuery
	}
	req, err := http.NewRequestWithContext(context.Background(), r.Method, u, strings.NewReader(body))
	if err != nil {
		return ""
	}
	_, signed, _ := strings.Cut(r.Header.Get("Authorization"), "SignedHeaders=")
	signed, _, _ = strings.Cut(signed, ",")
	for _, h := range strings.Split(signed, ";") {
		switch h {
		case "host", "x-amz-date", "x-amz-security-token":
			// The signer sets these itself, from the URL, the time and
			// the credentials.
		default:
			for _, v := range r.Header.Values(h) {
				req.Header.Add(h, v)
			}
		}
	}
	sum := sha256.Sum256([]byte(body))
	creds := aws.Credentials{AccessKeyID: id.AccessKeyID, SecretAccessKey: id.SecretAccessKey, SessionToken: id.SessionToken}
	if err := v4.NewSigner().SignHTTP(context.Background(), creds, req, hex.EncodeToString(sum[:]), "sts", region, when); err != nil {
		return ""
	}
	return req.Header.Get("Authorization")
}

// stsError is STS's error document.
func stsError(kind, code, msg string) string {
	return fmt.Sprintf(`<ErrorResponse xmlns="https://sts.amazonaws.com/doc/2011-06-15/">
  <Error>
    <Type>%s</Type>
    <Code>%s</Code>
    <Message>%s</Message>
  </Error>
  <RequestId>%s</RequestId>
</ErrorResponse>
`, kind, code, xmlText(msg), requestID())
}

func xmlText(s string) string {
	var b strings.Builder
	_ = xml.EscapeText(&b, []byte(s))
	return b.String()
}

var (
	idMu sync.Mutex
	idN  int
)

// requestID is a request id of STS's form, unique in the process.
func requestID() string {
	idMu.Lock()
	defer idMu.Unlock()
	idN++
	return fmt.Sprintf("00000000-0000-4000-8000-%012x", idN)
}
