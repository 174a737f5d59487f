// Package pages maps memory from the kernel for frames that are mostly
// holes: a Fetch answer whose record sets stay in pipes (single's parked
// answers) is read into a frame of the answer's size in which only the
// bytes between its record sets are ever written. Made by the Go runtime,
// such a frame is zeroed whole and lives on the collected heap, so every
// answer costs its whole size in zeroing, resident memory and collector
// work. Mapped here, the kernel gives a page only when it is first
// written: the holes cost address space alone, and the frame is no
// garbage for the collector.
//
// A mapping is given back with Unmap, which keeps a few for reuse (at
// most IdleMost bytes of them): mapping and unmapping a frame for every
// answer cost a tenth of the proxy's CPU where answers come a few hundred
// a second. A reused mapping holds what its last user wrote, as a pooled
// buffer does, and those pages stay resident while it waits, so the idle
// ones are bounded. One that becomes unreachable without Unmap is
// unmapped by a cleanup, so a path that forgets it loses no memory; the
// bytes must not be used once the Mapping is unmapped or unreachable.
package pages

import (
	"errors"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
)

// IdleMost is the most bytes of mappings kept for reuse.
const IdleMost = 16 << 20

// ErrUnsupported: this system maps no memory here; use the heap.
var ErrUnsupported = errors.New("pages: no anonymous mappings on this system")

// Mapping is a region of anonymous memory. The zero value holds none.
type Mapping struct {
	b       []byte
	cleanup runtime.Cleanup
	done    atomic.Bool
}

// live counts the bytes of Mappings in use.
var live atomic.Int64

// idle holds the regions kept for reuse, by size.
var idle struct {
	mu    sync.Mutex
	by    map[int][][]byte
	bytes int
}

// Live returns the bytes of the Mappings in use: mapped and not yet
// unmapped.
func Live() int64 { return live.Load() }

// Idle returns the bytes of the mappings kept for reuse.
func Idle() int {
	idle.mu.Lock()
	defer idle.mu.Unlock()
	return idle.bytes
}

// Map maps n bytes, which become resident page by page as they are
// written: a region kept for reuse of that size, which holds what its
// last user wrote, or a new one, zeroed.
func Map(n int) (*Mapping, error) {
	if n <= 0 {
		return nil, errors.New("pages: nothing to map")
	}
	b := reuse(n)
	if b == nil {
		var err error
		if b, err = mmap(n); err != nil {
			return nil, err
		}
	}
	live.Add(int64(len(b)))
	m := &Mapping{b: b}
	m.cleanup = runtime.AddCleanup(m, unmapLost, b)
	return m, nil
}

// Bytes returns the mapped bytes: length and capacity n.
func (m *Mapping) Bytes() []byte { return m.b }

// Unmap gives the memory back: kept for reuse while the idle ones hold
// less than IdleMost, else to the kernel. Later calls do nothing.
func (m *Mapping) Unmap() {
	if m == nil || !m.done.CompareAndSwap(false, true) {
		return
	}
	m.cleanup.Stop()
	b := m.b
	m.b = nil
	if b == nil {
		return
	}
	live.Add(-int64(len(b)))
	if !keep(b) {
		munmap(b)
	}
}

// Trim gives every mapping kept for reuse back to the kernel.
func Trim() {
	idle.mu.Lock()
	by := idle.by
	idle.by, idle.bytes = nil, 0
	idle.mu.Unlock()
	for _, regions := range by {
		for _, b := range regions {
			munmap(b)
		}
	}
}

// reuse takes a region of n bytes kept for reuse, or returns nil.
func reuse(n int) []byte {
	idle.mu.Lock()
	defer idle.mu.Unlock()
	regions := idle.by[n]
	if len(regions) == 0 {
		return nil
	}
	b := regions[len(regions)-1]
	idle.by[n] = regions[:len(regions)-1]
	idle.bytes -= n
	return b
}

// keep keeps b for reuse if the idle regions have room for it.
func keep(b []byte) bool {
	idle.mu.Lock()
	defer idle.mu.Unlock()
	if idle.bytes+len(b) > IdleMost {
		return false
	}
	if idle.by == nil {
		idle.by = make(map[int][][]byte)
	}
	idle.by[len(b)] = append(idle.by[len(b)], b)
	idle.bytes += len(b)
	return true
}

// unmapLost unmaps the memory of a Mapping that became unreachable
// without Unmap.
func unmapLost(b []byte) {
	live.Add(-int64(len(b)))
	munmap(b)
}

// Resident returns how many pages of b, which starts at a page (a
// Mapping's bytes), are in memory: what it costs.
func Resident(b []byte) (int, error) {
	page := os.Getpagesize()
	vec := make([]byte, (len(b)+page-1)/page)
	if len(vec) == 0 {
		return 0, nil
	}
	if err := mincore(b, vec); err != nil {
		return 0, err
	}
	n := 0
	for _, v := range vec {
		n += int(v & 1)
	}
	return n, nil
}
