package secretstore

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"

	"github.com/flotilla-gitops/flotilla/application"
)

// The STS request Vault's aws auth method (IAM type) takes as proof of an
// AWS identity: Vault sends it on to STS, which answers with the ARN of
// whoever signed it.
const (
	stsBody          = "Action=GetCallerIdentity&Version=2011-06-15"
	stsGlobalURL     = "https://sts.amazonaws.com/"
	stsGlobalRegion  = "us-east-1"
	vaultServerIDHdr = "X-Vault-AWS-IAM-Server-ID"
)

// awsChain returns the host's AWS credentials (defaultChain) for a
// login with a.
func awsChain(a *application.VaultAWS) (aws.CredentialsProvider, error) {
	region := a.Region
	if region == "" {
		region = stsGlobalRegion
	}
	c, err := defaultChain(region)
	if err != nil {
		return nil, fmt.Errorf("auth.aws: %w", err)
	}
	return c, nil
}

// awsLoginBody signs a GetCallerIdentity request with creds and returns
// the body of a login at Vault's aws auth method. The request is only
// signed here, never sent: it carries no secret, only a signature that
// holds for a few minutes and, with a header value, for one Vault only.
func awsLoginBody(ctx context.Context, a *application.VaultAWS, creds aws.CredentialsProvider) (map[string]any, error) {
	url, region := stsGlobalURL, stsGlobalRegion
	if a.Region != "" {
		url, region = "https://sts."+a.Region+".amazonaws.com/", a.Region
	}
	c, err := creds.Retrieve(ctx)
	if err != nil {
		// The chain's message says which sources it tried; it never holds
		// a key.
		return nil, fmt.Errorf("%w: auth.aws: no AWS credentials: %v", ErrUnavailable, err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(stsBody))
	if err != nil {
		return nil, fmt.Errorf("auth.aws: %w", err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded; charset=utf-8")
	if a.HeaderValue != "" {
		req.Header.Set(vaultServerIDHdr, a.HeaderValue)
	}
	sum := sha256.Sum256([]byte(stsBody))
	if err := v4.NewSigner().SignHTTP(ctx, c, req, hex.EncodeToString(sum[:]), "sts", region, time.Now()); err != nil {
		return nil, fmt.Errorf("%w: auth.aws: sign the STS request: %v", ErrUnavailable, err)
	}
	headers, err := json.Marshal(req.Header)
	if err != nil {
		return nil, fmt.Errorf("auth.aws: %w", err)
	}
	enc := base64.StdEncoding.EncodeToString
	return map[string]any{
		"role":                    a.Role,
		"iam_http_request_method": http.MethodPost,
		"iam_request_url":         enc([]byte(url)),
		"iam_request_body":        enc([]byte(stsBody)),
		"iam_request_headers":     enc(headers),
	}, nil
}
