package pages_test

import (
	"errors"
	"os"
	"runtime"
	"testing"
	"time"

	"github.com/inorder-proxy/inorder/internal/pages"
)

func mapOrSkip(t *testing.T, n int) *pages.Mapping {
	t.Helper()
	m, err := pages.Map(n)
	if errors.Is(err, pages.ErrUnsupported) {
		t.Skip(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// A mapping holds what is written to it, is counted live until it is
// unmapped, and is unmapped once however often Unmap is called; it is
// then kept for reuse.
func TestMapUnmap(t *testing.T) {
	pages.Trim()
	before := pages.Live()
	m := mapOrSkip(t, 1<<20)
	b := m.Bytes()
	if len(b) != 1<<20 || cap(b) != 1<<20 {
		t.Fatalf("mapped %d bytes of capacity %d, asked 1 MiB", len(b), cap(b))
	}
	for i, c := range b {
		if c != 0 {
			t.Fatalf("byte %d of a new mapping is %d", i, c)
		}
	}
	for i := range b {
		b[i] = byte(i)
	}
	for i, c := range b {
		if c != byte(i) {
			t.Fatalf("byte %d reads %d", i, c)
		}
	}
	if got := pages.Live() - before; got != 1<<20 {
		t.Fatalf("%d bytes live beside the mapping, want 1 MiB", got)
	}
	m.Unmap()
	m.Unmap()
	if got := pages.Live() - before; got != 0 {
		t.Fatalf("%d bytes live after Unmap", got)
	}
	if pages.Idle() != 1<<20 {
		t.Fatalf("%d bytes kept for reuse after Unmap, want the mapping's 1 MiB", pages.Idle())
	}
	var zero pages.Mapping
	zero.Unmap()
	if zero.Bytes() != nil || pages.Idle() != 1<<20 {
		t.Fatalf("the zero Mapping holds %d bytes, and its Unmap left %d idle", len(zero.Bytes()), pages.Idle())
	}
	if _, err := pages.Map(0); err == nil {
		t.Fatal("mapping nothing succeeded")
	}
}

// A mapping dropped without Unmap is unmapped once it is collected.
func TestLostMappingIsUnmapped(t *testing.T) {
	before := pages.Live()
	m := mapOrSkip(t, 256<<10)
	m.Bytes()[0] = 1
	m = nil
	deadline := time.Now().Add(10 * time.Second)
	for pages.Live() != before {
		if time.Now().After(deadline) {
			t.Fatalf("%d bytes still live after the mapping was collected", pages.Live()-before)
		}
		runtime.GC()
		time.Sleep(time.Millisecond)
	}
}

// Only the pages written to are resident: a frame that is mostly holes
// costs the pages of what is written in it.
func TestOnlyWrittenPagesAreResident(t *testing.T) {
	pages.Trim()
	m := mapOrSkip(t, 8<<20)
	defer m.Unmap()
	b := m.Bytes()
	page := os.Getpagesize()
	if n, err := pages.Resident(b); err != nil || n != 0 {
		t.Fatalf("%d pages resident before any write (%v)", n, err)
	}
	b[0], b[100*page+7], b[len(b)-1] = 1, 2, 3
	if n, err := pages.Resident(b); err != nil || n != 3 {
		t.Fatalf("%d pages resident after writes to 3 of %d (%v)", n, len(b)/page, err)
	}
}

// A mapping unmapped is reused by the next Map of its size, with what it
// held, while the idle ones hold at most IdleMost; past that, and after
// Trim, a new mapping is made, zeroed.
func TestMappingsAreReused(t *testing.T) {
	pages.Trim()
	m := mapOrSkip(t, 512<<10)
	first := &m.Bytes()[0]
	m.Bytes()[0] = 7
	m.Unmap()
	again := mapOrSkip(t, 512<<10)
	if &again.Bytes()[0] != first || again.Bytes()[0] != 7 || pages.Idle() != 0 {
		t.Fatalf("the region unmapped was not reused (same %v, byte %d, %d idle)", &again.Bytes()[0] == first, again.Bytes()[0], pages.Idle())
	}
	again.Unmap()
	pages.Trim()
	if pages.Idle() != 0 {
		t.Fatalf("%d bytes idle after Trim", pages.Idle())
	}
	fresh := mapOrSkip(t, 512<<10)
	if fresh.Bytes()[0] != 0 {
		t.Fatal("a mapping made after Trim holds an old byte")
	}
	fresh.Unmap()

	var ms []*pages.Mapping
	for range pages.IdleMost/(1<<20) + 3 {
		ms = append(ms, mapOrSkip(t, 1<<20))
	}
	for _, m := range ms {
		m.Unmap()
	}
	if pages.Idle() > pages.IdleMost {
		t.Fatalf("%d bytes kept for reuse, at most %d", pages.Idle(), pages.IdleMost)
	}
	pages.Trim()
}
