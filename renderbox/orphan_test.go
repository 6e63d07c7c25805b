package renderbox

import (
	"os"
	"testing"
	"time"
)

// A child whose parent is gone (the controller was killed outright) stops
// instead of rendering on, orphaned, until its CPU limit.
func TestAChildStopsWhenItsParentIsGone(t *testing.T) {
	gone := make(chan struct{})
	// Not this process's parent: as after the parent died and the child
	// was handed to init or a subreaper.
	go watchParent(os.Getppid()+1, 10*time.Millisecond, func() { close(gone) })
	select {
	case <-gone:
	case <-time.After(time.Minute):
		t.Fatal("the watch did not notice that the parent changed")
	}
}
