//go:build kms

package sopsage_test

import (
	"bytes"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/getsops/sops/v3"
	"github.com/getsops/sops/v3/hcvault"

	"github.com/flotilla-gitops/flotilla/sopsage"
	"github.com/flotilla-gitops/flotilla/sopsage/sopsagetest"
)

const withLibraryBuilt = true

// TestMain keeps the key services of the kms build off this machine's
// state: gpg would create a keyring in $HOME, the AWS SDK would ask the
// instance metadata service for credentials.
func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "sopsage-gnupg")
	if err != nil {
		panic(err)
	}
	os.Setenv("GNUPGHOME", dir)
	os.Setenv("AWS_EC2_METADATA_DISABLED", "true")
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

func TestIdentities_Decrypt_kmsBuildOpensShamirKeyGroups(t *testing.T) {
	a, b := sopsagetest.NewIdentity(t), sopsagetest.NewIdentity(t)
	ids, err := sopsage.ParseIdentities(append(bytes.Clone(a.File), b.File...))
	if err != nil {
		t.Fatal(err)
	}
	enc := shamirFile(t, "password: "+secret+"\n", a, b)
	got, err := ids.Decrypt("s.yaml", enc)
	if err != nil || !bytes.Contains(got, []byte(secret)) {
		t.Fatalf("Shamir file: %q, %v", got, err)
	}
	// One group's identity alone is below the threshold.
	if _, err := mustIdentities(t, a).Decrypt("s.yaml", enc); !errors.Is(err, sopsage.ErrNoMatch) {
		t.Errorf("one of two groups: %v; want ErrNoMatch", err)
	}
}

// A key type the kms build opens goes to its service; the service's
// failure is reported with the key type, and the age identities are never
// offered to it.
func TestIdentities_Decrypt_kmsBuildAsksTheKeyServiceAndNamesItsFailure(t *testing.T) {
	t.Setenv("VAULT_TOKEN", "flotilla-test")
	onlyVault := func(m *sops.Metadata) {
		m.KeyGroups = []sops.KeyGroup{{&hcvault.MasterKey{VaultAddress: "http://127.0.0.1:1", EnginePath: "transit", KeyName: "k", EncryptedKey: "vault:v1:AAAA", CreationDate: time.Now().UTC()}}}
	}
	enc := libEncrypt(t, sopsage.YAML, "password: "+secret+"\n", onlyVault)
	_, err := mustIdentities(t, sopsagetest.NewIdentity(t)).Decrypt("s.yaml", enc)
	if !errors.Is(err, sopsage.ErrNoAgeRecipient) || !strings.Contains(err.Error(), "the key service failed: hc_vault") {
		t.Fatalf("Vault-only file with the Vault unreachable: %v; want ErrNoAgeRecipient naming hc_vault", err)
	}
	if strings.Contains(err.Error(), "-tags kms") {
		t.Errorf("the kms build still tells the user to build with kms: %v", err)
	}
}
