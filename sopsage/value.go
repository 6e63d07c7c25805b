package sopsage

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/sha512"
	"encoding/base64"
	"errors"
	"fmt"
	"hash"
	"strconv"
	"strings"
	"time"
)

// macOnlyEncryptedSeed starts the MAC of a file written with
// mac_only_encrypted, so that such a MAC never equals one over all values.
// These bytes are part of the sops file format.
var macOnlyEncryptedSeed = []byte{0x8a, 0x3f, 0xd2, 0xad, 0x54, 0xce, 0x66, 0x52, 0x7b, 0x10, 0x34, 0xf3, 0xd1, 0x47, 0xbe, 0x0b, 0x0b, 0x97, 0x5b, 0x3b, 0xf4, 0x4f, 0x72, 0xc6, 0xfd, 0xad, 0xec, 0x81, 0x76, 0xf2, 0x7d, 0x69}

// errValue is a value that does not open with the data key: altered, or
// not in the form sops writes. It never carries the value's text.
var errValue = errors.New("a value does not authenticate")

// opener decrypts the values of one file and computes its MAC over them,
// in the order a format's walk presents them (document order).
type opener struct {
	rules *rules
	aead  cipher.AEAD // nonce size 32, as sops writes
	mac   hash.Hash
}

func newOpener(r *rules, dataKey []byte) (*opener, error) {
	block, err := aes.NewCipher(dataKey)
	if err != nil {
		return nil, fmt.Errorf("the data key is not an AES key: %w", err)
	}
	aead, err := cipher.NewGCMWithNonceSize(block, 32)
	if err != nil {
		return nil, err
	}
	o := &opener{rules: r, aead: aead, mac: sha512.New()}
	if r.macOnlyEncrypted {
		o.mac.Write(macOnlyEncryptedSeed)
	}
	return o, nil
}

// leaf takes the value at path, as the store read it (nil values are not
// passed), and returns its plaintext: decrypted when the rules say it was
// encrypted, as it is otherwise. Either way it goes into the MAC, unless
// the file's MAC covers only encrypted values.
func (o *opener) leaf(path []string, v any) (any, error) {
	if !o.rules.encrypted(path) {
		if !o.rules.macOnlyEncrypted {
			b, err := macBytes(v)
			if err != nil {
				return nil, err
			}
			o.mac.Write(b)
		}
		return v, nil
	}
	s, ok := v.(string)
	if !ok {
		return nil, errors.New("a value that should be encrypted is not a string")
	}
	plain, err := o.open(s, strings.Join(path, ":")+":")
	if err != nil {
		return nil, err
	}
	b, err := macBytes(plain)
	if err != nil {
		return nil, err
	}
	o.mac.Write(b)
	return plain, nil
}

// sum is the MAC as sops writes it before encrypting it.
func (o *opener) sum() string { return fmt.Sprintf("%X", o.mac.Sum(nil)) }

// open decrypts one ENC[AES256_GCM,data:...,iv:...,tag:...,type:...]
// value into the Go type its type field names. The empty string stands
// for an empty value.
func (o *opener) open(value, additional string) (any, error) {
	if value == "" {
		return "", nil
	}
	data, iv, tag, typ, ok := parseEnc(value)
	if !ok {
		return nil, errValue
	}
	if len(iv) != o.aead.NonceSize() {
		return nil, errValue
	}
	plain, err := o.aead.Open(nil, iv, append(data, tag...), []byte(additional))
	if err != nil {
		return nil, errValue
	}
	s := string(plain)
	var out any
	switch typ {
	case "str":
		out = s
	case "int":
		out, err = strconv.Atoi(s)
	case "float":
		out, err = strconv.ParseFloat(s, 64)
	case "bool":
		out, err = strconv.ParseBool(s)
	case "bytes":
		out = plain
	case "time":
		var t time.Time
		err = t.UnmarshalText(plain)
		out = t
	default:
		return nil, errValue
	}
	if err != nil {
		return nil, errValue
	}
	return out, nil
}

// parseEnc splits sops' value format. Each field is base64 except type.
func parseEnc(v string) (data, iv, tag []byte, typ string, ok bool) {
	rest, found := strings.CutPrefix(v, "ENC[AES256_GCM,data:")
	if !found || !strings.HasSuffix(rest, "]") {
		return nil, nil, nil, "", false
	}
	rest = rest[:len(rest)-1]
	d, rest, ok1 := strings.Cut(rest, ",iv:")
	i, rest, ok2 := strings.Cut(rest, ",tag:")
	t, typ, ok3 := strings.Cut(rest, ",type:")
	if !ok1 || !ok2 || !ok3 {
		return nil, nil, nil, "", false
	}
	var err1, err2, err3 error
	data, err1 = base64.StdEncoding.DecodeString(d)
	iv, err2 = base64.StdEncoding.DecodeString(i)
	tag, err3 = base64.StdEncoding.DecodeString(t)
	if err1 != nil || err2 != nil || err3 != nil {
		return nil, nil, nil, "", false
	}
	return data, iv, tag, typ, true
}

// macBytes is the byte form sops hashes for a value of each type it
// reads.
func macBytes(v any) ([]byte, error) {
	switch v := v.(type) {
	case string:
		return []byte(v), nil
	case int:
		return []byte(strconv.Itoa(v)), nil
	case float64:
		return []byte(strconv.FormatFloat(v, 'f', -1, 64)), nil
	case bool:
		if v {
			return []byte("True"), nil
		}
		return []byte("False"), nil
	case []byte:
		return v, nil
	case time.Time:
		return v.MarshalText()
	}
	return nil, fmt.Errorf("a value of type %T, which sops does not write", v)
}

// plainText is a decrypted value as text, for the flat formats (dotenv,
// INI), written the way sops writes it.
func plainText(v any) string {
	switch v := v.(type) {
	case string:
		return v
	case []byte:
		return string(v)
	case float64:
		s := strconv.FormatFloat(v, 'G', -1, 64)
		if !strings.ContainsAny(s, ".E") {
			s = strconv.FormatFloat(v, 'f', 1, 64)
		}
		return s
	case bool:
		return strconv.FormatBool(v)
	case time.Time:
		return v.Format(time.RFC3339)
	}
	return fmt.Sprint(v)
}
