package source

import (
	"errors"
	"testing"
	"time"
)

func TestFailureWindow_doublesUpToMaxAndResets(t *testing.T) {
	b := NewFailureWindow(10*time.Second, 35*time.Second)
	now := time.Unix(0, 0)
	boom := errors.New("boom")
	for _, want := range []time.Duration{10 * time.Second, 20 * time.Second, 35 * time.Second, 35 * time.Second} {
		if got := b.Fail(now, boom).Sub(now); got != want {
			t.Errorf("window %v, want %v", got, want)
		}
	}
	if _, err, ok := b.Blocked(now.Add(34 * time.Second)); !ok || err != boom {
		t.Error("not blocked inside the window")
	}
	if _, _, ok := b.Blocked(now.Add(35 * time.Second)); ok {
		t.Error("blocked after the window")
	}
	b.Reset()
	if _, _, ok := b.Blocked(now); ok {
		t.Error("blocked after reset")
	}
	if got := b.Fail(now, boom).Sub(now); got != 10*time.Second {
		t.Errorf("window after reset %v, want min", got)
	}
}
