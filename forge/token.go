package forge

import (
	"fmt"
	"io"
	"os"
	"strings"
)

// maxTokenFile bounds a token file: a token is a line, not a document.
const maxTokenFile = 64 << 10

// ReadTokenFile reads an API token from the file at path, trimmed. It is
// called at every use, so a rotated token needs no restart; its errors name
// the file, never its content.
func ReadTokenFile(path string) (string, error) {
	info, err := os.Stat(path)
	if err != nil {
		return "", fmt.Errorf("forge tokenFile: %w", err)
	}
	if !info.Mode().IsRegular() {
		return "", fmt.Errorf("forge tokenFile %s is not a regular file", path)
	}
	f, err := os.Open(path)
	if err != nil {
		return "", fmt.Errorf("forge tokenFile: %w", err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxTokenFile))
	if err != nil {
		return "", fmt.Errorf("forge tokenFile %s: %w", path, err)
	}
	t := strings.TrimSpace(string(b))
	if t == "" {
		return "", fmt.Errorf("forge tokenFile %s is empty", path)
	}
	return t, nil
}
