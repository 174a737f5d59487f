package authz

import (
	"encoding/binary"
	"os"
	"path/filepath"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestProduceHead: the head of a Produce decides it only when it allows
// the whole request, and never allows what Check refuses, whatever the
// records (here transactional ones).
func TestProduceHead(t *testing.T) {
	g := testGuard(t)
	c := alice(g)
	const head = 4 + 1<<10 // what the proxy reads before deciding
	markTransactional := func(req *kmsg.ProduceRequest) {
		for i := range req.Topics {
			for j := range req.Topics[i].Partitions {
				rec := req.Topics[i].Partitions[j].Records
				binary.BigEndian.PutUint16(rec[21:], binary.BigEndian.Uint16(rec[21:])|0x10)
			}
		}
	}
	for _, tc := range []struct {
		name   string
		topics []string
		txn    *string
		want   bool
	}{
		{"allowed topic", []string{"a"}, nil, true},
		{"denied topic", []string{"b"}, nil, false},
		{"unknown topic", []string{"c"}, nil, false},
		{"two topics, both allowed", []string{"a", "a"}, nil, false},
		{"two topics, one denied", []string{"a", "b"}, nil, false},
		{"denied transactional id", []string{"a"}, kmsg.StringPtr("tx"), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req := produce(64<<10, tc.topics...)
			req.TransactionID = tc.txn
			if tc.txn != nil {
				markTransactional(req)
			}
			h, f := frame(t, req)
			got := g.ProduceHead(nil, c, h, f[:head], len(f))
			if got != tc.want {
				t.Fatalf("ProduceHead %v, want %v", got, tc.want)
			}
			if got && !g.Authorizer().Check(c, req).Allowed() {
				t.Fatalf("ProduceHead allowed what Check refuses")
			}
		})
	}

	// A transactional id the client may write: allowed from the head,
	// whether the records are transactional or not.
	path := filepath.Join(t.TempDir(), "acls.yaml")
	text := testACLs + "  - {principal: User:alice, resourceType: TRANSACTIONAL_ID, resourceName: tx, operation: WRITE}\n"
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	g2, err := New(path, g.opts, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	req := produce(64<<10, "a")
	req.TransactionID = kmsg.StringPtr("tx")
	markTransactional(req)
	h, f := frame(t, req)
	if !g2.ProduceHead(nil, alice(g2), h, f[:head], len(f)) || !g2.Authorizer().Check(alice(g2), req).Allowed() {
		t.Errorf("a transactional Produce with an allowed id and topic is not allowed from its head")
	}

	// A head that ends before the first topic's name decides nothing.
	req = produce(64<<10, "a")
	h, f = frame(t, req)
	if g.ProduceHead(nil, c, h, f[:h.Body+8], len(f)) {
		t.Errorf("a head without the topic's name allowed the request")
	}
	// Nor does a frame shorter than its head claims.
	if g.ProduceHead(nil, c, h, f[:head], head-1) {
		t.Errorf("a head longer than its frame allowed the request")
	}
}
