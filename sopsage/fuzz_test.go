package sopsage_test

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/flotilla-gitops/flotilla/sopsage"
	"github.com/flotilla-gitops/flotilla/sopsage/sopsagetest"
)

// FuzzDecryptErrors feeds repository bytes, seeded with files sops writes in
// each format, to Decrypt with the identity they were encrypted for. It
// holds what the package promises of any input: it returns, a file that
// does not look encrypted comes back unchanged, one that does either
// decrypts or fails with a *DecryptError, and no error quotes a value.
func FuzzDecryptErrors(f *testing.F) {
	const secret = "fz-secret-3b1d9e"
	id := sopsagetest.NewIdentity(f)
	ids, err := sopsage.ParseIdentities(id.File)
	if err != nil {
		f.Fatal(err)
	}
	for name, plain := range map[string]string{
		"values.yaml":     "token: " + secret + "\nlist: [a, " + secret + "]\nn: 3\n",
		"config.json":     `{"token": "` + secret + `", "n": 3, "on": true}`,
		"app.env":         "TOKEN=" + secret + "\nOTHER=x\n",
		"settings.ini":    "[db]\npassword = " + secret + "\n",
		"db_password.txt": secret,
	} {
		enc := sopsagetest.Encrypt(f, name, []byte(plain), id.Recipient)
		f.Add(name, enc)
		f.Add(name, bytes.Replace(enc, []byte("ENC["), []byte("ENC[["), 1))
	}
	f.Add("values.yaml", sopsagetest.EncryptMatching(f, "values.yaml", []byte("labels:\n  leak: "+secret+"\nenvironment:\n  A: b\n"), "^leak$", id.Recipient))
	f.Add("x.yaml", []byte("sops:\n  age: &a [*a]\n"))
	f.Add("x.json", []byte(`{"sops": {"mac": 1}}`))

	f.Fuzz(func(t *testing.T, name string, data []byte) {
		out, err := ids.Decrypt(name, data)
		_, detected := sopsage.Detect(name, data)
		switch {
		case !detected:
			if err != nil || !bytes.Equal(out, data) {
				t.Fatalf("a plain file came back changed (err %v)", err)
			}
		case err != nil:
			var de *sopsage.DecryptError
			if !errors.As(err, &de) {
				t.Fatalf("error %T %v is not a *DecryptError", err, err)
			}
			if strings.Contains(err.Error(), secret) && !bytes.Contains(data, []byte(secret)) {
				t.Fatalf("error %q quotes a decrypted value", err)
			}
			if out != nil {
				t.Fatal("a failed decrypt returned data")
			}
		}
	})
}
