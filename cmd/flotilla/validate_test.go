package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func writeFile(t *testing.T, content string) string {
	t.Helper()
	name := filepath.Join(t.TempDir(), "applications.yaml")
	if err := os.WriteFile(name, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return name
}

const validFile = `apiVersion: flotilla/v1
applications:
  - name: shop
    source: {repoURL: "https://git.example.com/ops/deploy.git"}
  - name: blog
    source: {repoURL: "git@git.example.com:ops/blog.git"}
`

const invalidFile = `apiVersion: flotilla/v1
applications:
  - name: shop
    source:
      repoURL: https://git.example.com/ops/deploy.git
      password: hunter2
    syncPolicy: {interval: 1s}
`

func TestRunValidate(t *testing.T) {
	valid, invalid := writeFile(t, validFile), writeFile(t, invalidFile)
	tests := []struct {
		name       string
		opts       validateOptions
		code       int
		stdout     string
		stderrHas  []string
		stderrLine int // number of lines expected on stderr; -1 to skip
	}{
		{name: "valid", opts: validateOptions{File: valid}, code: exitOK, stdout: valid + ": 2 applications valid\n"},
		{
			name: "invalid lists every problem", opts: validateOptions{File: invalid}, code: exitFailed,
			stderrHas: []string{
				invalid + `:6: application "shop": field applications[0].source.password: unknown field "password"`,
				invalid + `:7: application "shop": field applications[0].syncPolicy.interval: 1s is shorter than the minimum 10s`,
			},
			stderrLine: 2,
		},
		{name: "unreadable", opts: validateOptions{File: filepath.Join(t.TempDir(), "nope.yaml")}, code: exitFailed, stderrHas: []string{"no such file"}, stderrLine: 1},
		{name: "no file flag", opts: validateOptions{}, code: exitMisuse, stderrHas: []string{"-f"}, stderrLine: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := runValidate(tt.opts, &stdout, &stderr)
			if code != tt.code {
				t.Errorf("exit %d, want %d; stderr:\n%s", code, tt.code, stderr.String())
			}
			if stdout.String() != tt.stdout {
				t.Errorf("stdout %q, want %q", stdout.String(), tt.stdout)
			}
			for _, s := range tt.stderrHas {
				if !strings.Contains(stderr.String(), s) {
					t.Errorf("stderr lacks %q:\n%s", s, stderr.String())
				}
			}
			if n := strings.Count(stderr.String(), "\n"); tt.stderrLine > 0 && n != tt.stderrLine {
				t.Errorf("%d lines on stderr, want %d:\n%s", n, tt.stderrLine, stderr.String())
			}
			if strings.Contains(stderr.String(), "hunter2") {
				t.Error("inline password echoed")
			}
		})
	}
}

// TestValidateCommand_exitCodes goes through the root command, so flag
// parsing and the exit code mapping in main.go are covered too.
func TestValidateCommand_exitCodes(t *testing.T) {
	valid, invalid := writeFile(t, validFile), writeFile(t, invalidFile)
	tests := []struct {
		args []string
		code int
	}{
		{[]string{"validate", "-f", valid}, exitOK},
		{[]string{"validate", "--file", valid}, exitOK},
		{[]string{"validate", "-f", invalid}, exitFailed},
		{[]string{"validate"}, exitMisuse},
		{[]string{"validate", valid}, exitMisuse},
		{[]string{"validate", "-f"}, exitMisuse},
	}
	for _, tt := range tests {
		if got := run(tt.args); got != tt.code {
			t.Errorf("flotilla %s: exit %d, want %d", strings.Join(tt.args, " "), got, tt.code)
		}
	}
}
