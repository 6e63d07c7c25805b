//go:build !kms

package sopsage

// withLibrary is nil without the kms build tag: files that need the sops
// library's key service are refused, saying which build opens them.
// With it, noKey is the reason and detail the start of the message when
// no key opens the data key.
var withLibrary func(k *Identities, f Format, data []byte, noKey error, detail string) ([]byte, error)
