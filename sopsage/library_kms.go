//go:build kms

package sopsage

import (
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"strings"
	"time"

	"filippo.io/age"
	"github.com/getsops/sops/v3"
	"github.com/getsops/sops/v3/aes"
	agekey "github.com/getsops/sops/v3/age"
	"github.com/getsops/sops/v3/config"
	"github.com/getsops/sops/v3/keyservice"
	"github.com/getsops/sops/v3/stores/dotenv"
	"github.com/getsops/sops/v3/stores/ini"
	sopsjson "github.com/getsops/sops/v3/stores/json"
	sopsyaml "github.com/getsops/sops/v3/stores/yaml"
	"google.golang.org/grpc"
)

// withLibrary, in the kms build, opens with the sops library the files
// this package's own reader leaves out: those whose data key only a cloud
// KMS, Vault or PGP key opens, and those using Shamir key groups or
// comment-driven rules. Age stanzas still open only with the identities
// given; every other key type uses the library's local key service, with
// the credentials of the controller's environment (AWS_*, GOOGLE_*,
// AZURE_*, VAULT_*, GNUPGHOME), which is what building with kms opts into.
var withLibrary = decryptWithLibrary

// store is the part of a sops store this package uses.
type store interface {
	LoadEncryptedFile(in []byte) (sops.Tree, error)
	EmitPlainFile(in sops.TreeBranches) ([]byte, error)
}

func storeFor(f Format) store {
	switch f {
	case YAML:
		return sopsyaml.NewStore(&config.YAMLStoreConfig{})
	case JSON:
		return sopsjson.NewStore(&config.JSONStoreConfig{})
	case Dotenv:
		return dotenv.NewStore(&config.DotenvStoreConfig{})
	case INI:
		return ini.NewStore(&config.INIStoreConfig{})
	}
	return sopsjson.NewBinaryStore(&config.JSONBinaryStoreConfig{})
}

func decryptWithLibrary(k *Identities, f Format, data []byte, noKey error, detail string) (plain []byte, err error) {
	fail := func(reason error, format string, args ...any) error {
		return &DecryptError{Format: f, Reason: reason, Detail: fmt.Sprintf(format, args...)}
	}
	defer func() {
		if r := recover(); r != nil {
			plain, err = nil, fail(ErrMalformed, "")
		}
	}()
	st := storeFor(f)
	tree, err := st.LoadEncryptedFile(data)
	if err != nil {
		return nil, fail(ErrMalformed, "%v", err)
	}
	var ids agekey.ParsedIdentities
	if k != nil {
		ids = agekey.ParsedIdentities(k.ids)
	}
	ageSvc := &ageClient{ids: ids}
	otherSvc := &otherKeysClient{local: keyservice.NewLocalClient()}
	dataKey, err := tree.Metadata.GetDataKeyWithKeyServices([]keyservice.KeyServiceClient{ageSvc, otherSvc}, nil)
	if err != nil {
		switch {
		case ageSvc.failed != nil:
			return nil, fail(ErrModified, "the data key does not decrypt (%v)", ageSvc.failed)
		case otherSvc.failed != nil:
			return nil, fail(noKey, "%s; the key service failed: %v", detail, otherSvc.failed)
		}
		return nil, fail(noKey, "%s", detail)
	}
	defer clear(dataKey)

	cipher := aes.NewCipher()
	mac, err := tree.Decrypt(dataKey, cipher)
	if err != nil {
		// The library's message may quote a value that is not in sops'
		// ciphertext format, which can be plaintext someone added.
		return nil, fail(ErrModified, "a value does not authenticate")
	}
	stored, err := cipher.Decrypt(tree.Metadata.MessageAuthenticationCode, dataKey, tree.Metadata.LastModified.Format(time.RFC3339))
	storedMAC, _ := stored.(string)
	if err == nil && storedMAC == "" {
		return nil, fail(ErrModified, "the MAC is missing")
	}
	if err != nil || subtle.ConstantTimeCompare([]byte(storedMAC), []byte(mac)) != 1 {
		return nil, fail(ErrModified, "MAC mismatch")
	}
	out, err := st.EmitPlainFile(tree.Branches)
	if err != nil {
		return nil, fail(ErrMalformed, "the decrypted content cannot be written as %s", f)
	}
	return out, nil
}

// ageClient opens age stanzas with the identities it holds and refuses
// every other key type, so that the library's own age source, which reads
// the environment, is never used. It remembers the first failure that was
// not a plain "not for these identities", to tell a wrong key from an
// altered file. One ageClient serves one file, on one goroutine.
type ageClient struct {
	ids    agekey.ParsedIdentities
	failed error
}

var _ keyservice.KeyServiceClient = (*ageClient)(nil)

func (c *ageClient) Decrypt(_ context.Context, req *keyservice.DecryptRequest, _ ...grpc.CallOption) (*keyservice.DecryptResponse, error) {
	ak := req.GetKey().GetAgeKey()
	if ak == nil {
		return nil, errors.New("not an age key")
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

// otherKeysClient hands every key type but age to the library's local key
// service, and remembers the first failure, whose text names the key and
// the service's answer but never a value.
type otherKeysClient struct {
	local  keyservice.KeyServiceClient
	failed error
}

var _ keyservice.KeyServiceClient = (*otherKeysClient)(nil)

func (c *otherKeysClient) Decrypt(ctx context.Context, req *keyservice.DecryptRequest, opts ...grpc.CallOption) (*keyservice.DecryptResponse, error) {
	if req.GetKey().GetAgeKey() != nil {
		return nil, errors.New("age keys open only with the configured identities")
	}
	resp, err := c.local.Decrypt(ctx, req, opts...)
	if err != nil && c.failed == nil {
		c.failed = fmt.Errorf("%s: %w", strings.TrimSpace(keyKind(req.GetKey())), err)
	}
	return resp, err
}

func (c *otherKeysClient) Encrypt(context.Context, *keyservice.EncryptRequest, ...grpc.CallOption) (*keyservice.EncryptResponse, error) {
	return nil, fmt.Errorf("sopsage decrypts only: %w", errors.ErrUnsupported)
}

// keyKind names a key service key by its type, as sops spells it.
func keyKind(k *keyservice.Key) string {
	switch {
	case k.GetKmsKey() != nil:
		return "kms"
	case k.GetGcpKmsKey() != nil:
		return "gcp_kms"
	case k.GetAzureKeyvaultKey() != nil:
		return "azure_kv"
	case k.GetVaultKey() != nil:
		return "hc_vault"
	case k.GetPgpKey() != nil:
		return "pgp"
	}
	return "key"
}
