package source

import (
	"bytes"
	"crypto/sha512"
	"encoding/base64"
	"fmt"

	"golang.org/x/crypto/ssh"
)

// sshSigner signs commits the way `git commit -S` does with gpg.format=ssh:
// an SSHSIG signature (OpenSSH's PROTOCOL.sshsig) in the "git" namespace
// over the commit as encoded without its signature, armored, which git
// stores in the commit's gpgsig header and `git verify-commit` checks
// against an allowed signers file.
type sshSigner struct {
	signer ssh.Signer
}

// newSSHSigner reads an unencrypted OpenSSH private key. The parser's
// message never holds key material, but only the file name is named.
func newSSHSigner(file string) (*sshSigner, error) {
	pem, err := readLocal(file)
	if err != nil {
		return nil, fmt.Errorf("signing key file: %w", err)
	}
	s, err := ssh.ParsePrivateKey(pem)
	if err != nil {
		return nil, fmt.Errorf("signing key file %s: not a usable unencrypted private key", file)
	}
	return &sshSigner{signer: s}, nil
}

const sshsigNamespace = "git"

// sign returns the armored signature of message.
func (s *sshSigner) sign(message []byte) ([]byte, error) {
	h := sha512.Sum512(message)
	signed := append([]byte("SSHSIG"), ssh.Marshal(struct {
		Namespace, Reserved, HashAlg string
		Hash                         []byte
	}{sshsigNamespace, "", "sha512", h[:]})...)
	var sig *ssh.Signature
	var err error
	if as, ok := s.signer.(ssh.AlgorithmSigner); ok && s.signer.PublicKey().Type() == ssh.KeyAlgoRSA {
		// ssh-rsa (SHA-1) signatures are refused by current OpenSSH.
		sig, err = as.SignWithAlgorithm(nil, signed, ssh.KeyAlgoRSASHA512)
	} else {
		sig, err = s.signer.Sign(nil, signed)
	}
	if err != nil {
		return nil, fmt.Errorf("ssh signature: %w", err)
	}
	blob := append([]byte("SSHSIG"), ssh.Marshal(struct {
		Version                      uint32
		PublicKey                    []byte
		Namespace, Reserved, HashAlg string
		Signature                    []byte
	}{1, s.signer.PublicKey().Marshal(), sshsigNamespace, "", "sha512", ssh.Marshal(sig)})...)
	enc := base64.StdEncoding.EncodeToString(blob)
	var b bytes.Buffer
	b.WriteString("-----BEGIN SSH SIGNATURE-----\n")
	for len(enc) > 70 {
		b.WriteString(enc[:70] + "\n")
		enc = enc[70:]
	}
	b.WriteString(enc + "\n-----END SSH SIGNATURE-----\n")
	return b.Bytes(), nil
}
