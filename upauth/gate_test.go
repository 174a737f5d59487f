package upauth

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/inorder-proxy/inorder/internal/proxyerr"
)

func TestGatesBackOffPerAddress(t *testing.T) {
	var g Gates
	if err := g.Check("a:9092"); err != nil {
		t.Fatalf("no refusal yet: %v", err)
	}
	refused := errors.New("bad password")
	var waits []time.Duration
	for range 7 {
		waits = append(waits, g.Failed("a:9092", refused))
	}
	want := []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second, 16 * time.Second, 30 * time.Second, 30 * time.Second}
	for i := range want {
		if waits[i] != want[i] {
			t.Fatalf("waits %v, want %v", waits, want)
		}
	}
	err := g.Check("a:9092")
	if !errors.Is(err, proxyerr.UpstreamAuth) || !strings.Contains(err.Error(), "a:9092: backing off until") || !strings.HasSuffix(err.Error(), "after: bad password") {
		t.Fatalf("check while backing off: %v", err)
	}
	if err := g.Check("b:9092"); err != nil {
		t.Fatalf("another address is dialled: %v", err)
	}
	g.Succeeded("a:9092")
	if err := g.Check("a:9092"); err != nil {
		t.Fatalf("after a success: %v", err)
	}
	if w := g.Failed("a:9092", refused); w != time.Second {
		t.Fatalf("first refusal after a success waits %v, want 1s", w)
	}
}

func TestGatesRefusingEveryAddress(t *testing.T) {
	var g Gates
	addrs := []string{"a:9092", "b:9092"}
	if err := g.Refusing(addrs); err != nil {
		t.Fatalf("nothing refused: %v", err)
	}
	g.Failed("a:9092", errors.New("first"))
	if err := g.Refusing(addrs); err != nil {
		t.Fatalf("one of two refused: %v", err)
	}
	g.Failed("b:9092", errors.New("second"))
	err := g.Refusing(addrs)
	if !errors.Is(err, proxyerr.UpstreamAuth) || err.Error() != proxyerr.UpstreamAuth.Error()+": second" {
		t.Fatalf("every address refused: %v", err)
	}
	if err := g.Refusing(nil); err != nil {
		t.Fatalf("no address: %v", err)
	}
}

func TestGateKey(t *testing.T) {
	own := &Authenticator{o: Options{Mechanism: "PLAIN", Username: "proxy"}}
	other := &Authenticator{o: Options{Mechanism: "SCRAM-SHA-256", Username: "alice"}}
	for _, c := range []struct {
		auth *Authenticator
		want string
	}{
		{nil, "a:9092"},
		{own, "a:9092"},
		{other, "a:9092 as SCRAM-SHA-256 alice"},
	} {
		if got := GateKey("a:9092", c.auth, own); got != c.want {
			t.Errorf("GateKey(%v) = %q, want %q", c.auth, got, c.want)
		}
	}
}
