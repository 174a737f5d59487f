package proxy

import (
	"io"
	"testing"

	"github.com/inorder-proxy/inorder/internal/sockio/sockiotest"
)

// A request head or the bytes between partitions go upstream once per
// spliced request or partition: that write allocates nothing.
func TestWriteUpBeforeAllocatesNothing(t *testing.T) {
	a, b := sockiotest.Pair(t)
	go io.Copy(io.Discard, b)
	c := &conn{up: a}
	head := []byte("head")
	one := [1][]byte{head}
	if err := c.writeUpBefore(one[:]); err != nil {
		t.Fatal(err)
	}
	allocs := testing.AllocsPerRun(100, func() {
		if err := c.writeUpBefore(one[:]); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Fatalf("writeUpBefore allocates %v times per call", allocs)
	}
}
