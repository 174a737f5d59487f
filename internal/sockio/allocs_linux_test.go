package sockio

import (
	"io"
	"testing"

	"github.com/inorder-proxy/inorder/internal/sockio/sockiotest"
)

// The writes a caller makes per request allocate nothing.
func TestWritesAllocateNothing(t *testing.T) {
	a, b := sockiotest.Pair(t)
	go io.Copy(io.Discard, b)
	more, try := NewMoreWriter(a), NewTryWriter(a)
	head, body := []byte("head"), []byte("body")
	var bufs [2][]byte
	allocs := testing.AllocsPerRun(100, func() {
		bufs = [2][]byte{head, body}
		if err := more.Write(bufs[:]); err != nil {
			t.Fatal(err)
		}
		bufs = [2][]byte{head, body}
		if _, err := try.Write(bufs[:]); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Fatalf("a write with MSG_MORE and a try write allocate %v times", allocs)
	}
}
