package chartengine

import "fmt"

// minRedacted is the shortest decrypted value blanked out of messages:
// shorter ones ("1", "yes") would mangle messages and protect nothing.
const minRedacted = 4

// secretsOf collects the text of every value of a decrypted value file, so
// that no error message can carry one into status, events or logs.
func secretsOf(v any, out []string) []string {
	switch v := v.(type) {
	case map[string]any:
		for _, e := range v {
			out = secretsOf(e, out)
		}
	case []any:
		for _, e := range v {
			out = secretsOf(e, out)
		}
	case nil:
	default:
		if s := fmt.Sprint(v); len(s) >= minRedacted {
			out = append(out, s)
		}
	}
	return out
}
