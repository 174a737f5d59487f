package budget

import (
	"errors"
	"sync"
	"testing"
	"time"
)

func TestReserveWaitsAndNeverExceeds(t *testing.T) {
	b := New(1000)
	stop := make(chan struct{})
	if err := b.Reserve(700, true, stop, time.Time{}); err != nil {
		t.Fatal(err)
	}
	got := make(chan error, 1)
	go func() { got <- b.Reserve(100, true, stop, time.Time{}) }()
	select {
	case err := <-got:
		t.Fatalf("a bulk reservation past limit-reserve (750) went through: %v", err)
	case <-time.After(50 * time.Millisecond):
	}
	if !b.TryReserve(250, false) {
		t.Fatal("the reserve is not open to small reservations while bulk ones wait")
	}
	if b.TryReserve(51, false) {
		t.Fatal("reserved past the limit")
	}
	b.Release(700, true)
	if err := <-got; err != nil {
		t.Fatal(err)
	}
	if used := b.Used(); used != 350 {
		t.Fatalf("used %d, want 350", used)
	}
	if n, d := b.Waited(); n != 1 || d <= 0 {
		t.Fatalf("waited %d times for %v", n, d)
	}
}

func TestReserveStops(t *testing.T) {
	b := New(100)
	b.TryReserve(100, false)
	stop := make(chan struct{})
	got := make(chan error, 1)
	go func() { got <- b.Reserve(10, false, stop, time.Time{}) }()
	close(stop)
	if err := <-got; !errors.Is(err, ErrStopped) {
		t.Fatalf("got %v, want ErrStopped", err)
	}
	if err := b.Reserve(10, false, nil, time.Now().Add(20*time.Millisecond)); !errors.Is(err, ErrDeadline) {
		t.Fatalf("got %v, want ErrDeadline", err)
	}
	if err := b.Reserve(101, false, stop, time.Time{}); err == nil {
		t.Fatal("a reservation above the limit was accepted")
	}
	if err := b.Reserve(80, true, stop, time.Time{}); err == nil {
		t.Fatal("a bulk reservation above the bulk share was accepted")
	}
}

func TestConcurrentNeverExceeds(t *testing.T) {
	b := New(10_000)
	var wg sync.WaitGroup
	var mu sync.Mutex
	peak := int64(0)
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 2000 {
				n := int64(1 + (g*31+i*17)%900)
				bulk := i%3 == 0
				if err := b.Reserve(n, bulk, nil, time.Time{}); err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				peak = max(peak, b.Used())
				mu.Unlock()
				b.Release(n, bulk)
			}
		}()
	}
	wg.Wait()
	if peak > 10_000 || b.Used() != 0 {
		t.Fatalf("peak %d over the limit or %d left", peak, b.Used())
	}
}

func TestNilBoundsNothing(t *testing.T) {
	var b *Budget
	if err := b.Reserve(1<<40, true, nil, time.Time{}); err != nil || !b.TryReserve(1<<40, false) {
		t.Fatal("a nil budget refused")
	}
	b.Release(5, false)
}

// BenchmarkReserveRelease prints what one reservation and its release cost
// on the hot path, uncontended and with every core contending.
func BenchmarkReserveRelease(b *testing.B) {
	bud := New(1 << 30)
	b.Run("uncontended", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			bud.TryReserve(4096, false)
			bud.Release(4096, false)
		}
	})
	b.Run("parallel", func(b *testing.B) {
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				bud.TryReserve(4096, false)
				bud.Release(4096, false)
			}
		})
	})
}
