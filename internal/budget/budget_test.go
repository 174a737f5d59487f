package budget

import (
	"errors"
	"sync"
	"testing"
	"time"
)

// With a limit of 1000: requests may hold 875 together (125 kept for
// responses), bulk requests 750 (125 more kept for small ones).
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
		t.Fatalf("a bulk reservation past the bulk share (750) went through: %v", err)
	case <-time.After(50 * time.Millisecond):
	}
	if !b.TryReserve(175, false) {
		t.Fatal("the small requests' share is not open while bulk ones wait")
	}
	if b.TryReserve(1, false) {
		t.Fatal("requests took the response reserve")
	}
	if !b.TryReserveResponse(125) {
		t.Fatal("the response reserve is not open to responses")
	}
	if b.TryReserveResponse(1) {
		t.Fatal("reserved past the limit")
	}
	b.Release(700, true)
	if err := <-got; err != nil {
		t.Fatal(err)
	}
	if used := b.Used(); used != 400 {
		t.Fatalf("used %d, want 400", used)
	}
	if n, d := b.Waited(); n != 1 || d <= 0 {
		t.Fatalf("waited %d times for %v", n, d)
	}
}

// TestResponsesTakeWhatRequestsLeave: responses may use the whole limit,
// and their memory is not counted against the requests' share: a request
// waits for the limit, and for what requests hold.
func TestResponsesTakeWhatRequestsLeave(t *testing.T) {
	b := New(1000)
	if !b.TryReserveResponse(1000) {
		t.Fatal("a response could not take the whole limit")
	}
	if b.TryReserve(1, false) {
		t.Fatal("a request went past the limit")
	}
	got := make(chan error, 1)
	go func() { got <- b.Reserve(700, true, nil, time.Now().Add(5*time.Second)) }()
	time.Sleep(20 * time.Millisecond)
	b.ReleaseResponse(900)
	if err := <-got; err != nil {
		t.Fatalf("a bulk request of 700 with 100 held by responses: %v", err)
	}
	if !b.TryReserve(175, false) {
		t.Fatal("the requests' share (875) is not open beside 100 held by responses")
	}
	b.Release(700, true)
	b.Release(175, false)
	b.ReleaseResponse(100)
	if b.Used() != 0 {
		t.Fatalf("%d left", b.Used())
	}
}

func TestMaxIsWhatAClassCanHold(t *testing.T) {
	b := New(1 << 20)
	if got, want := b.Max(true), int64(3<<18); got != want {
		t.Fatalf("bulk requests can hold %d, want %d", got, want)
	}
	if got, want := b.Max(false), int64(7<<17); got != want {
		t.Fatalf("small requests can hold %d, want %d", got, want)
	}
	if got := b.MaxResponse(); got != 1<<20 {
		t.Fatalf("responses can hold %d, want the limit", got)
	}
	for _, c := range []struct {
		name string
		err  error
	}{
		{"bulk", b.Reserve(b.Max(true)+1, true, nil, time.Time{})},
		{"small", b.Reserve(b.Max(false)+1, false, nil, time.Time{})},
		{"response", b.ReserveResponse(b.MaxResponse()+1, nil, time.Time{})},
	} {
		if !errors.Is(c.err, ErrTooLarge) {
			t.Fatalf("a %s reservation past what its class can hold: %v, want ErrTooLarge", c.name, c.err)
		}
	}
}

func TestReserveStops(t *testing.T) {
	b := New(100)
	b.TryReserveResponse(100)
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
	if err := b.Reserve(80, true, stop, time.Time{}); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("a bulk reservation above the bulk share: %v, want ErrTooLarge", err)
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
				n := int64(1 + (g*31+i*17)%700)
				resp, bulk := i%4 == 1, i%3 == 0
				var err error
				if resp {
					err = b.ReserveResponse(n, nil, time.Time{})
				} else {
					err = b.Reserve(n, bulk, nil, time.Time{})
				}
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				peak = max(peak, b.Used())
				mu.Unlock()
				if resp {
					b.ReleaseResponse(n)
				} else {
					b.Release(n, bulk)
				}
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

// TestResponsesAheadLeaveTheNextOwed: with a limit of 1000, responses read
// ahead of their turn hold at most 875, as requests do, and the two
// together at most 938, however they share it; the last 62 are kept for
// responses owed next, so that other connections can read a request and
// the answer they owe next while some connections' responses wait for a
// late one.
func TestResponsesAheadLeaveTheNextOwed(t *testing.T) {
	b := New(1000)
	if got, want := b.MaxAhead(), int64(875); got != want {
		t.Fatalf("responses ahead can hold %d, want %d", got, want)
	}
	if !b.TryReserveAhead(875) {
		t.Fatal("responses ahead cannot take 875 of an empty budget")
	}
	if b.TryReserveAhead(1) {
		t.Fatal("responses ahead took more than requests may")
	}
	if err := b.ReserveAhead(1, nil, time.Now().Add(20*time.Millisecond)); !errors.Is(err, ErrDeadline) {
		t.Fatalf("a response ahead past its share: %v, want ErrDeadline", err)
	}
	if !b.TryReserve(63, false) {
		t.Fatal("requests cannot take what responses ahead leave of the shared 938")
	}
	if b.TryReserve(1, false) {
		t.Fatal("a request took the reserve kept for responses owed next")
	}
	if !b.TryReserveResponse(62) {
		t.Fatal("a response owed next cannot take the reserve")
	}
	b.ReleaseAhead(875)
	if !b.TryReserve(437, false) || !b.TryReserveAhead(438) {
		t.Fatal("requests and responses ahead cannot share 938")
	}
	if b.TryReserveAhead(1) || b.TryReserve(1, false) {
		t.Fatal("requests and responses ahead took the reserve kept for responses owed next")
	}
	// Responses owed next count against the limit only: with none ahead,
	// requests have their whole share beside them.
	b.ReleaseAhead(438)
	if !b.TryReserve(375, false) {
		t.Fatal("the requests' share (875) is not open beside a response owed next")
	}
	if err := b.ReserveAhead(b.MaxAhead()+1, nil, time.Time{}); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("a response ahead past what its class can hold: %v, want ErrTooLarge", err)
	}
	b.Release(875, false)
	b.ReleaseResponse(62)
	if b.Used() != 0 {
		t.Fatalf("%d left", b.Used())
	}
}
