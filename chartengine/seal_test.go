package chartengine

import (
	"errors"
	"strings"
	"testing"
)

// A decrypted text value is sealed before templates run, so no way of
// writing it out gives plaintext: quoted by YAML, as a block scalar,
// transformed by a template function, or as a key. Each is refused naming
// the template, the field and the values path, never the value.
func TestSealedValuesAreRefusedInAnyForm(t *testing.T) {
	secrets := map[string]string{
		"quote and colon": `p4ss': w0rd`,
		"multi-line key":  "-----BEGIN KEY-----\nMIIBOgIBAAJBAKj34GkxFhD90vcNLYLInFEX6Ppy1tPf9Cnzj4p4WGeKLs1Pt8Qu\n-----END KEY-----",
		"plain":           "hunter2-s3cr3t",
	}
	templates := map[string]string{
		"as is":      `{{ .Values.token }}`,
		"quoted":     `{{ .Values.token | quote }}`,
		"b64enc":     `{{ .Values.token | b64enc }}`,
		"b64 inside": `{{ printf "x:%s" .Values.token | b64enc }}`,
		"upper":      `{{ .Values.token | upper }}`,
		"lower":      `{{ .Values.token | lower }}`,
		"printf":     `{{ printf "token=%s;" .Values.token | quote }}`,
		"hex":        `{{ printf "%x" .Values.token }}`,
	}
	for sname, secret := range secrets {
		for tname, expr := range templates {
			t.Run(sname+"/"+tname, func(t *testing.T) {
				decrypt := func(file string, data []byte) ([]byte, error) {
					if file == "chart/secret.enc.yaml" {
						return []byte("token: " + yamlQuote(secret) + "\n"), nil
					}
					return data, nil
				}
				root := copyExample(t, map[string]string{
					"chart/secret.enc.yaml":   "ciphertext\n",
					"chart/templates/zz.yaml": "services:\n  web:\n    labels:\n      leak: " + expr + "\n",
				})
				err := mustFail(render(t, root, Dir{ValueFiles: []string{"secret.enc.yaml"}, Decrypt: decrypt}))
				fe := wantFault(t, err, "chart/templates/zz.yaml", "chart shop", "value token", "services.web.labels.leak")
				if !errors.Is(fe, ErrPlaintextSecret) {
					t.Fatalf("want ErrPlaintextSecret, got %v", err)
				}
				if strings.Contains(err.Error(), secret) || strings.Contains(err.Error(), "BEGIN KEY") {
					t.Fatalf("the error quotes the secret: %v", err)
				}
			})
		}
	}
	t.Run("as a key", func(t *testing.T) {
		decrypt := func(file string, data []byte) ([]byte, error) {
			if file == "chart/secret.enc.yaml" {
				return []byte("nested: {token: \"hunter2-s3cr3t\"}\n"), nil
			}
			return data, nil
		}
		root := copyExample(t, map[string]string{
			"chart/secret.enc.yaml":   "ciphertext\n",
			"chart/templates/zz.yaml": "services:\n  web:\n    labels:\n      {{ .Values.nested.token }}: x\n",
		})
		err := mustFail(render(t, root, Dir{ValueFiles: []string{"secret.enc.yaml"}, Decrypt: decrypt}))
		wantFault(t, err, "chart/templates/zz.yaml", "value nested.token")
	})
}

// The seal is for text: a decrypted number still decides, and one written
// out as it is is still refused by its digits.
func TestADecryptedNumberDecidesButIsNotWritten(t *testing.T) {
	decrypt := func(file string, data []byte) ([]byte, error) {
		if file == "chart/secret.enc.yaml" {
			return []byte("pin: 48213\nmode: \"production\"\n"), nil
		}
		return data, nil
	}
	decide := "services:\n  web:\n    labels:\n      big: {{ if gt (int .Values.pin) 1000 }}\"yes\"{{ end }}\n      set: {{ if .Values.mode }}\"yes\"{{ end }}\n"
	root := copyExample(t, map[string]string{"chart/secret.enc.yaml": "ciphertext\n", "chart/templates/zz.yaml": decide})
	r := mustRender(t, root, Dir{ValueFiles: []string{"secret.enc.yaml"}, Decrypt: decrypt})
	if strings.Contains(r.Manifest, "48213") || strings.Contains(r.Manifest, "production") || strings.Contains(r.Manifest, sealMark) {
		t.Fatal("manifest holds a decrypted value or a placeholder")
	}
	root = copyExample(t, map[string]string{"chart/secret.enc.yaml": "ciphertext\n", "chart/templates/zz.yaml": "services:\n  web:\n    labels:\n      pin: \"{{ .Values.pin }}\"\n"})
	if err := mustFail(render(t, root, Dir{ValueFiles: []string{"secret.enc.yaml"}, Decrypt: decrypt})); !errors.Is(err, ErrPlaintextSecret) {
		t.Fatalf("want ErrPlaintextSecret, got %v", err)
	}
}

func yamlQuote(s string) string {
	return `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`).Replace(s) + `"`
}
