//go:build !kms

package sopsage_test

// withLibraryBuilt reports whether the sops library's key service is
// linked (the kms build tag).
const withLibraryBuilt = false
