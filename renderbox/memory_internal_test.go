package renderbox

import "testing"

// A child stopped by its address-space limit must be reported as the memory
// limit whatever runtime said it: the race detector's words (a -race build of
// the controller, as the e2e suite runs) were reported as an unnamed failure.
func TestMemoryFailureKnowsEveryRuntimesWords(t *testing.T) {
	for _, tt := range []struct {
		stderr string
		want   bool
	}{
		{"fatal error: runtime: out of memory", true},
		{"runtime: failed to allocate 1048576 bytes", true},
		{"mmap: cannot allocate memory", true},
		{"fatal error: too many address space collisions for -race mode", true},
		{"panic: template: shop:3: unexpected EOF", false},
		{"", false},
	} {
		if got := memoryFailure(tt.stderr); got != tt.want {
			t.Errorf("memoryFailure(%q) = %v, want %v", tt.stderr, got, tt.want)
		}
	}
}
