package main

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func TestTokenFromEnv(t *testing.T) {
	files := map[string]string{"/tok": "from-file\n"}
	read := func(p string) ([]byte, error) {
		if s, ok := files[p]; ok {
			return []byte(s), nil
		}
		return nil, errors.New("no such file")
	}
	for _, tc := range []struct {
		env     map[string]string
		want    string
		wantErr string
	}{
		{nil, "", ""},
		{map[string]string{envToken: " abc "}, "abc", ""},
		{map[string]string{envTokenFile: "/tok"}, "from-file", ""},
		{map[string]string{envTokenFile: "/missing"}, "", envTokenFile},
		{map[string]string{envTokenFile: "/tok", envToken: "x"}, "", "both"},
	} {
		got, err := tokenFromEnv(func(k string) string { return tc.env[k] }, read)
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("%v: err = %v, want %q", tc.env, err, tc.wantErr)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("%v: got %q, %v; want %q", tc.env, got, err, tc.want)
		}
	}
}

func TestAgo(t *testing.T) {
	now := time.Date(2025, 1, 2, 12, 0, 0, 0, time.UTC)
	for d, want := range map[time.Duration]string{
		5 * time.Second:  "5s ago",
		3 * time.Minute:  "3m ago",
		5 * time.Hour:    "5h ago",
		72 * time.Hour:   "3d ago",
		-2 * time.Second: "0s ago",
	} {
		if got := ago(now, now.Add(-d)); got != want {
			t.Errorf("ago(%s) = %q, want %q", d, got, want)
		}
	}
	if ago(now, time.Time{}) != "-" {
		t.Error("zero time is not -")
	}
}

func TestOneLine(t *testing.T) {
	if got := oneLine("a\n  b\tc", 10); got != "a b c" {
		t.Errorf("got %q", got)
	}
	if got := oneLine("abcdefghij", 5); got != "abcd…" {
		t.Errorf("got %q", got)
	}
}
