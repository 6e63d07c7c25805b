package sopsage

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"slices"
)

// sealKeyLabel separates the seal key from anything else derived from the
// same identities.
const sealKeyLabel = "flotilla seal key v1"

// SealKey is a secret key derived from the identities, for keyed digests of
// decrypted values: a digest that changes when a value changes, for
// manifests and object names that others can read, without being a plain
// hash anyone could test guesses against. It is the same for the same
// identities in any order, on any host and after a restart, so a render
// means the same everywhere; nil when k holds none.
func (k *Identities) SealKey() []byte {
	if k.Len() == 0 {
		return nil
	}
	var parts []string
	for _, id := range k.ids {
		if s, ok := id.(interface{ String() string }); ok {
			parts = append(parts, s.String())
		}
	}
	if len(parts) == 0 {
		return nil
	}
	slices.Sort(parts)
	mac := hmac.New(sha256.New, []byte(sealKeyLabel))
	for _, p := range parts {
		mac.Write([]byte(p))
		mac.Write([]byte{0})
	}
	return mac.Sum(nil)
}

// Fingerprint names the identities without revealing them: equal for the
// same set, different for another, "" for none. A cache of renders keys on
// it so that a rotated key file is a different render.
func (k *Identities) Fingerprint() string {
	key := k.SealKey()
	if key == nil {
		return ""
	}
	sum := sha256.Sum256(key)
	return hex.EncodeToString(sum[:8])
}
