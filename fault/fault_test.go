package fault

import (
	"errors"
	"fmt"
	"testing"
)

func TestError_Error(t *testing.T) {
	base := errors.New("boom")
	tests := []struct {
		err  *Error
		want string
	}{
		{&Error{App: "shop", File: "docker-compose.yml", Line: 4, Field: "services.web.image", Err: base},
			`application "shop": file docker-compose.yml:4: field services.web.image: boom`},
		{&Error{File: "a.yml", Err: base}, "file a.yml: boom"},
		{&Error{App: "x", Err: base}, `application "x": boom`},
	}
	for _, tt := range tests {
		if got := tt.err.Error(); got != tt.want {
			t.Errorf("got %q, want %q", got, tt.want)
		}
	}
}

func TestWithApp(t *testing.T) {
	base := errors.New("boom")
	inner := &Error{File: "c.yml", Field: "services", Err: base}

	got := WithApp("shop", inner)
	var fe *Error
	if !errors.As(got, &fe) || fe.App != "shop" || fe.File != "c.yml" {
		t.Fatalf("WithApp lost fields: %#v", got)
	}
	if inner.App != "" {
		t.Fatal("WithApp mutated its input")
	}
	if !errors.Is(got, base) {
		t.Fatal("cause lost")
	}

	outer := fmt.Errorf("render: %w", inner)
	got = WithApp("shop", outer)
	if !errors.As(got, &fe) || fe.App != "shop" {
		t.Fatalf("wrapped: %v", got)
	}
	if want := `application "shop": render: file c.yml: field services: boom`; got.Error() != want {
		t.Fatalf("got %q want %q", got.Error(), want)
	}

	plain := WithApp("shop", base)
	if plain.Error() != `application "shop": boom` || !errors.Is(plain, base) {
		t.Fatalf("plain: %v", plain)
	}
	if WithApp("shop", nil) != nil {
		t.Fatal("nil not nil")
	}
}
