package compose

import (
	"bytes"
	"errors"
	"io/fs"

	"github.com/flotilla-gitops/flotilla/fault"
	"github.com/flotilla-gitops/flotilla/sopsage"
)

// DecryptFunc returns the plaintext of a file Render has just read: data
// itself, unchanged, when the file is not encrypted; an error when it looks
// encrypted and cannot be decrypted. file is the path relative to the
// repository root (its extension picks the SOPS format). It is called from
// one goroutine per Render, but several Renders may share it.
//
// (*sopsage.Identities).Decrypt is one.
type DecryptFunc func(file string, data []byte) ([]byte, error)

// sopsState is what a Render knows about decryption.
type sopsState struct {
	decrypt DecryptFunc
	// cipher maps each decrypted file (repository path) to its content as
	// stored. SOPS keeps keys and structure in the clear, so for a YAML
	// file the stored text still has every field on the line the user
	// sees in git, which the decrypted text may not.
	cipher map[string][]byte
	// composeFiles are the decrypted files whose fault lines come from
	// the stored text; other decrypted files report no line.
	composeFiles map[string]bool
	// values are the values of decrypted env files. Interpolation carries
	// them into files that were never encrypted, so any message may
	// quote one; withhold blanks them out wherever they appear.
	values []string
	// envSealed maps service and variable to a value that came from a
	// decrypted env_file or an encrypted environment entry: see sealEnv.
	envSealed map[string]map[string]string
	// interp maps each value of a decrypted interpolation env file (of
	// minRedacted characters or more) to its variable's name: the values
	// interpolation can carry anywhere in the compose model.
	interp map[string]string
	// key is the seal key (Dir.SealKey, or derived: see sealKey).
	key []byte
}

// useDecrypter installs fn, or, when it is nil, a decrypter without keys:
// it still recognises encrypted files, and refuses them.
func (p *project) useDecrypter(fn DecryptFunc, key []byte) {
	if fn == nil {
		var none *sopsage.Identities
		fn = none.Decrypt
	}
	p.sops = sopsState{decrypt: fn, cipher: map[string][]byte{}, composeFiles: map[string]bool{}, key: key}
}

// decrypt runs the decrypter on a file just read from rel. A failure names
// the file as a read failure does; its reason never quotes content.
func (p *project) decrypt(rel string, data []byte) ([]byte, error) {
	if p.sops.decrypt == nil {
		p.useDecrypter(nil, nil)
	}
	plain, err := p.sops.decrypt(rel, data)
	if err != nil {
		return nil, &fs.PathError{Op: "decrypt", Path: rel, Err: err}
	}
	if !bytes.Equal(plain, data) {
		p.sops.cipher[rel] = data
		p.rememberValues(plain)
	}
	return plain, nil
}

// minRedacted is the shortest value withhold blanks out: shorter ones
// ("1", "yes") would mangle messages and protect nothing.
const minRedacted = 4

// rememberValues keeps the values of plain when it reads as an env file.
func (p *project) rememberValues(plain []byte) {
	vars := map[string]string{}
	if parseDotenv(plain, vars) != nil {
		return
	}
	for _, v := range vars {
		if len(v) >= minRedacted {
			p.sops.values = append(p.sops.values, v)
		}
	}
}

func (p *project) wasDecrypted(rel string) bool {
	_, ok := p.sops.cipher[rel]
	return ok
}

// lineSource is the text fault lines of compose file rel are looked up in:
// the stored text when it was decrypted, src otherwise.
func (p *project) lineSource(rel string, src []byte) []byte {
	if stored, ok := p.sops.cipher[rel]; ok {
		p.sops.composeFiles[rel] = true
		return stored
	}
	return src
}

// warnDecryptedConfig notes that a config's plaintext will be visible:
// the manifest holds it sealed, but a swarm config, unlike a secret, can be
// read back by anyone who can inspect configs.
func (p *project) warnDecryptedConfig(kind, key, rel string) {
	if kind == "configs" && p.wasDecrypted(rel) {
		p.warns = append(p.warns, "config "+key+" is decrypted from "+rel+
			": its plaintext is readable from the swarm config by anyone who can inspect configs; declare it under secrets to keep it private")
	}
}

// withhold replaces the message of a fault reported against a decrypted
// file. Parsers quote what they fail on (an interpolation error quotes the
// value, the env file reader quotes a line), and for such a file that
// would be plaintext in a status, event or log. File and field stay, and
// so does the line when it points into the stored text; a failure to read
// or decrypt another file is kept as it is, since it names only that file.
func (p *project) withhold(err error) error {
	var fe *fault.Error
	if err == nil || (len(p.sops.cipher) == 0 && !p.usedRefs) || !errors.As(err, &fe) {
		return err
	}
	if !p.wasDecrypted(fe.File) {
		if len(p.sops.values) == 0 {
			return err
		}
		cp := *fe
		cp.Err = fault.Redact(fe.Err, p.sops.values)
		return &cp
	}
	var pe *fs.PathError
	if errors.As(fe.Err, &pe) || errors.Is(fe.Err, ErrEncryptedOutsideEnvironment) {
		return err // names files and fields only: SOPS leaves keys in the clear
	}
	var already *withheldError
	cp := *fe
	if !errors.As(fe.Err, &already) {
		cp.Err = &withheldError{cause: fe.Err}
	}
	if !p.sops.composeFiles[fe.File] {
		cp.Line = 0
	}
	return &cp
}

// withheldFor withholds err when it is about the content of decrypted file
// rel, and returns it unchanged otherwise.
func (p *project) withheldFor(rel string, err error) error {
	if p.wasDecrypted(rel) {
		return &withheldError{cause: err}
	}
	return err
}

// withheldError hides a message that could quote decrypted content. It
// still unwraps, so errors.Is finds the kind of problem; only its text is
// replaced.
type withheldError struct{ cause error }

func (e *withheldError) Error() string {
	return "invalid content (the details are withheld because they could quote values decrypted with SOPS; decrypt the file locally and render it to see them)"
}

func (e *withheldError) Unwrap() error { return e.cause }
