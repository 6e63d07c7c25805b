package compose

import (
	"bufio"
	"bytes"
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// lineError is a problem on one line of an env file; Render turns it into a
// fault.Error with the line filled in.
type lineError struct {
	line int
	err  error
}

func (e *lineError) Error() string { return fmt.Sprintf("line %d: %v", e.line, e.err) }
func (e *lineError) Unwrap() error { return e.err }

// parseDotenv reads an interpolation env file (the --env-file of a stack)
// into vars, overwriting what earlier files set.
//
// The format is the common dotenv subset that a shell `set -a; . file` and
// docker compose agree on, and nothing that needs a shell:
//
//   - blank lines and lines starting with '#' are skipped, a UTF-8 BOM is dropped;
//   - an optional leading "export " is ignored;
//   - KEY=VALUE, where KEY has no whitespace; whitespace around an unquoted
//     VALUE is trimmed and " #" starts a comment;
//   - 'VALUE' is taken literally; "VALUE" understands \n, \t, \" and \\;
//   - a bare KEY takes the value an earlier line or file gave it, and is
//     left out otherwise (never taken from the controller's environment);
//   - no ${...} expansion happens inside values.
func parseDotenv(data []byte, vars map[string]string) error {
	data = bytes.TrimPrefix(data, []byte("\xef\xbb\xbf"))
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 0, 64*1024), 1024*1024)
	for n := 1; sc.Scan(); n++ {
		raw := sc.Bytes()
		if !utf8.Valid(raw) {
			return &lineError{n, fmt.Errorf("invalid UTF-8")}
		}
		line := strings.TrimSpace(string(raw))
		if line == "" || line[0] == '#' {
			continue
		}
		line = strings.TrimPrefix(line, "export ")
		key, value, hasValue := strings.Cut(line, "=")
		key = strings.TrimSpace(key)
		if key == "" {
			return &lineError{n, fmt.Errorf("no variable name")}
		}
		if strings.IndexFunc(key, unicode.IsSpace) >= 0 {
			return &lineError{n, fmt.Errorf("variable name %q contains whitespace", key)}
		}
		if !hasValue {
			// A bare name re-exports a value set earlier; there is nothing
			// to do, and an unknown one stays unset.
			continue
		}
		v, err := dotenvValue(strings.TrimSpace(value))
		if err != nil {
			return &lineError{n, fmt.Errorf("%s: %w", key, err)}
		}
		vars[key] = v
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("read env file: %w", err)
	}
	return nil
}

// dotenvValue unquotes one value as parseDotenv describes.
func dotenvValue(v string) (string, error) {
	if v == "" {
		return "", nil
	}
	switch q := v[0]; q {
	case '\'', '"':
		end := closingQuote(v, q)
		if end < 0 {
			return "", fmt.Errorf("unterminated %c quote", q)
		}
		if rest := strings.TrimSpace(v[end+1:]); rest != "" && rest[0] != '#' {
			return "", fmt.Errorf("unexpected text after closing quote")
		}
		inner := v[1:end]
		if q == '\'' {
			return inner, nil
		}
		return unescapeDouble(inner), nil
	}
	if i := strings.Index(v, " #"); i >= 0 {
		v = strings.TrimSpace(v[:i])
	}
	return v, nil
}

// closingQuote finds the quote that ends a value opened with q at v[0].
func closingQuote(v string, q byte) int {
	for i := 1; i < len(v); i++ {
		switch {
		case q == '"' && v[i] == '\\':
			i++
		case v[i] == q:
			return i
		}
	}
	return -1
}

func unescapeDouble(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '\\' || i+1 == len(s) {
			b.WriteByte(s[i])
			continue
		}
		i++
		switch s[i] {
		case 'n':
			b.WriteByte('\n')
		case 't':
			b.WriteByte('\t')
		case 'r':
			b.WriteByte('\r')
		case '"', '\\', '$':
			b.WriteByte(s[i])
		default:
			b.WriteByte('\\')
			b.WriteByte(s[i])
		}
	}
	return b.String()
}
