package sopsage

import (
	"context"
	"errors"
	"fmt"

	"filippo.io/age"
	agekey "github.com/getsops/sops/v3/age"
	"github.com/getsops/sops/v3/keyservice"
	"google.golang.org/grpc"
)

// ageClient is the only key service the library is given for one file. It
// opens age stanzas with the identities it holds and refuses every other
// key type, so the library's own local service, which would read the
// environment or call cloud KMS APIs, is never used.
//
// It remembers the first failure that was not a plain "not for these
// identities", to tell a wrong key from an altered file. One ageClient
// serves one file, on one goroutine.
type ageClient struct {
	ids    agekey.ParsedIdentities
	failed error
}

var _ keyservice.KeyServiceClient = (*ageClient)(nil)

func (c *ageClient) Decrypt(_ context.Context, req *keyservice.DecryptRequest, _ ...grpc.CallOption) (*keyservice.DecryptResponse, error) {
	ak := req.GetKey().GetAgeKey()
	if ak == nil {
		return nil, errors.New("only age keys are used")
	}
	if len(c.ids) == 0 {
		// MasterKey.Decrypt would go looking in the environment.
		return nil, ErrNoIdentity
	}
	mk := &agekey.MasterKey{Recipient: ak.GetRecipient(), EncryptedKey: string(req.GetCiphertext())}
	c.ids.ApplyToMasterKey(mk)
	plain, err := mk.Decrypt()
	if err != nil {
		var noMatch *age.NoIdentityMatchError
		if !errors.As(err, &noMatch) && c.failed == nil {
			c.failed = errors.Unwrap(err)
			if c.failed == nil {
				c.failed = err
			}
		}
		return nil, err
	}
	return &keyservice.DecryptResponse{Plaintext: plain}, nil
}

func (c *ageClient) Encrypt(context.Context, *keyservice.EncryptRequest, ...grpc.CallOption) (*keyservice.EncryptResponse, error) {
	return nil, fmt.Errorf("sopsage decrypts only: %w", errors.ErrUnsupported)
}
