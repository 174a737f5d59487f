package rewrite

import (
	"bytes"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// fetchTail returns the tail of a Fetch response at version naming the
// nodes at hosts (the part FetchTail rewrites), with the prefix that
// precedes it in an empty response.
func fetchTail(version int16, hosts ...string) (prefix, tail []byte) {
	resp := kmsg.NewPtrFetchResponse()
	resp.Version = version
	prefix = resp.AppendTo(nil)
	if resp.IsFlexible() {
		prefix = prefix[:len(prefix)-1]
	}
	for i, h := range hosts {
		b := kmsg.NewFetchResponseBroker()
		b.NodeID, b.Host, b.Port = int32(i), h, upstreamPort(int32(i))
		if i%2 == 1 {
			b.Rack = kmsg.StringPtr("rack")
		}
		resp.Brokers = append(resp.Brokers, b)
	}
	return prefix, resp.AppendTo(nil)[len(prefix):]
}

// hostMapper maps every node to host, at proxyPort.
type hostMapper string

func (h hostMapper) MapNode(id int32, _ string, _ int32) (string, int32, error) {
	return string(h), proxyPort(id), nil
}

func (h hostMapper) MapController(id int32, _ string, _ int32) (string, int32, error) {
	return string(h), proxyPort(id), nil
}

// TestFetchTail: endpoints rewritten to hosts as long as the upstream's or
// shorter keep their place, padded to the tail's length; rewritten longer
// (or one or two bytes shorter in all, which no filler fits) they are
// dropped. Either way the tail keeps its length, reads with kmsg, and
// names no upstream address.
func TestFetchTail(t *testing.T) {
	up := strings.Repeat("u", 20)
	for _, tc := range []struct {
		proxy string
		nodes int
		fate  TailFate
	}{
		{strings.Repeat("p", 20), 2, TailRewritten},
		{strings.Repeat("p", 10), 2, TailRewritten},
		{"p", 3, TailRewritten},
		{strings.Repeat("p", 19), 1, TailEndpointsDropped}, // one byte of room
		{strings.Repeat("p", 19), 2, TailEndpointsDropped}, // two
		{strings.Repeat("p", 19), 3, TailRewritten},        // three: the smallest filler
		{strings.Repeat("p", 21), 1, TailEndpointsDropped},
		{strings.Repeat("p", 300), 3, TailEndpointsDropped},
	} {
		for v := int16(16); v <= kmsg.NewPtrFetchResponse().MaxVersion(); v++ {
			hosts := make([]string, tc.nodes)
			for i := range hosts {
				hosts[i] = up
			}
			prefix, tail := fetchTail(v, hosts...)
			n := len(tail)
			fate, err := FetchTail(v, tail, hostMapper(tc.proxy))
			if err != nil {
				t.Fatalf("%d nodes at %d-byte hosts: %v", tc.nodes, len(tc.proxy), err)
			}
			if fate != tc.fate || len(tail) != n {
				t.Fatalf("%d nodes at %d-byte hosts: fate %d, want %d", tc.nodes, len(tc.proxy), fate, tc.fate)
			}
			resp := kmsg.NewPtrFetchResponse()
			resp.Version = v
			if err := resp.ReadFrom(append(prefix, tail...)); err != nil {
				t.Fatalf("%d nodes at %d-byte hosts: kmsg: %v", tc.nodes, len(tc.proxy), err)
			}
			want := tc.nodes
			if fate == TailEndpointsDropped {
				want = 0
			}
			if len(resp.Brokers) != want {
				t.Fatalf("%d nodes at %d-byte hosts: %d endpoints, want %d", tc.nodes, len(tc.proxy), len(resp.Brokers), want)
			}
			for i, b := range resp.Brokers {
				if b.NodeID != int32(i) || b.Host != tc.proxy || b.Port != proxyPort(int32(i)) || (i%2 == 1) != (b.Rack != nil) {
					t.Fatalf("endpoint %d: %+v", i, b)
				}
			}
		}
	}
}

// TestFetchTailAsIs: a tail naming no endpoint is left byte for byte, and
// one that does not read fails with ErrTail.
func TestFetchTailAsIs(t *testing.T) {
	_, tail := fetchTail(16)
	was := bytes.Clone(tail)
	if fate, err := FetchTail(16, tail, hostMapper("p")); err != nil || fate != TailAsIs || !bytes.Equal(tail, was) {
		t.Fatalf("an empty tag section: fate %d, %v, %x", fate, err, tail)
	}
	_, tail = fetchTail(16, "host")
	if _, err := FetchTail(16, tail[:len(tail)-1], hostMapper("p")); !errors.Is(err, ErrTail) {
		t.Fatalf("a cut tag section: %v", err)
	}
}

// FuzzFetchTail: whatever the tail, FetchTail fails where kmsg fails to
// read it, and otherwise leaves a tail of the same length that kmsg reads,
// in which every endpoint is the mapper's and, rewritten, the tags are in
// increasing order.
func FuzzFetchTail(f *testing.F) {
	for v := int16(16); v <= kmsg.NewPtrFetchResponse().MaxVersion(); v++ {
		for _, hosts := range [][]string{nil, {"b0.upstream.test"}, {"b0.upstream.test", "10.1.1.1", "x"}} {
			_, tail := fetchTail(v, hosts...)
			f.Add(tail, v)
		}
		// Endpoints and an unknown tag above the two-byte filler.
		resp := kmsg.NewPtrFetchResponse()
		resp.Version = v
		prefix := resp.AppendTo(nil)
		resp.Brokers = []kmsg.FetchResponseBroker{{NodeID: 1, Host: "b1.upstream.test", Port: 9092}}
		resp.UnknownTags.Set(20000, []byte("newer"))
		f.Add(resp.AppendTo(nil)[len(prefix)-1:], v)
	}
	f.Fuzz(func(t *testing.T, tail []byte, version int16) {
		max := kmsg.NewPtrFetchResponse().MaxVersion()
		version = int16(uint16(version) % uint16(max+1))
		prefix, _ := fetchTail(version)
		before := kmsg.NewPtrFetchResponse()
		before.Version = version
		kerr := before.ReadFrom(append(bytes.Clone(prefix), tail...))
		n := len(tail)
		fate, err := FetchTail(version, tail, newFakeMapper())
		if (kerr == nil) != (err == nil) {
			t.Fatalf("Fetch v%d tail %x: kmsg says %v, FetchTail %v", version, tail, kerr, err)
		}
		if err != nil {
			return
		}
		if (fate == TailAsIs) != (len(before.Brokers) == 0) {
			t.Fatalf("Fetch v%d: fate %d with %d endpoints", version, fate, len(before.Brokers))
		}
		after := kmsg.NewPtrFetchResponse()
		after.Version = version
		if len(tail) != n {
			t.Fatalf("the tail changed length")
		}
		if err := after.ReadFrom(append(bytes.Clone(prefix), tail...)); err != nil {
			t.Fatalf("Fetch v%d: the rewritten tail does not read: %v", version, err)
		}
		if fate == TailEndpointsDropped && len(after.Brokers) != 0 {
			t.Fatalf("Fetch v%d: endpoints dropped, yet %d remain", version, len(after.Brokers))
		}
		if fate == TailRewritten && len(after.Brokers) != len(before.Brokers) {
			t.Fatalf("Fetch v%d: %d endpoints rewritten into %d", version, len(before.Brokers), len(after.Brokers))
		}
		for _, a := range addrs(after) {
			if a.host != proxyHost(a.id) || a.port != proxyPort(a.id) {
				t.Fatalf("Fetch v%d: node %d left at %s:%d", version, a.id, a.host, a.port)
			}
		}
		if fate != TailAsIs {
			if tags := tailTags(t, tail); !slices.IsSorted(tags) || len(slices.Compact(slices.Clone(tags))) != len(tags) {
				t.Fatalf("Fetch v%d: the rewritten tail holds tags %v, not in increasing order", version, tags)
			}
		}
	})
}

// tailTags returns the tags of the tag section a tail starts with, in the
// order it holds them.
func tailTags(t *testing.T, tail []byte) []uint32 {
	t.Helper()
	count, w := kbin.Uvarint(tail)
	if w <= 0 {
		t.Fatalf("tail %x: no tag count", tail)
	}
	rest := tail[w:]
	var tags []uint32
	for range count {
		tag, tw := kbin.Uvarint(rest)
		size, sw := kbin.Uvarint(rest[max(tw, 0):])
		if tw <= 0 || sw <= 0 || int(size) > len(rest)-tw-sw {
			t.Fatalf("tail %x: tagged field %d does not read", tail, len(tags))
		}
		tags = append(tags, tag)
		rest = rest[tw+sw+int(size):]
	}
	return tags
}

// TestFetchTailKeepsTagOrder: a tail whose endpoints come with an unknown
// tag above the two-byte filler (a newer broker's field, another proxy's
// filler) is padded with a filler above that tag, the fields in
// increasing tag order, the unknown one kept.
func TestFetchTailKeepsTagOrder(t *testing.T) {
	for _, unknown := range []uint32{20000, 1<<14 - 1, 1<<21 - 1} {
		for _, proxy := range []string{"p", strings.Repeat("p", 10)} {
			resp := kmsg.NewPtrFetchResponse()
			resp.Version = 16
			prefix := resp.AppendTo(nil)
			prefix = prefix[:len(prefix)-1]
			for i := range int32(2) {
				b := kmsg.NewFetchResponseBroker()
				b.NodeID, b.Host, b.Port = i, upstreamHost(i), upstreamPort(i)
				resp.Brokers = append(resp.Brokers, b)
			}
			resp.UnknownTags.Set(unknown, []byte("newer"))
			tail := resp.AppendTo(nil)[len(prefix):]
			fate, err := FetchTail(16, tail, hostMapper(proxy))
			if err != nil || fate != TailRewritten {
				t.Fatalf("unknown tag %d, host %q: fate %d, %v", unknown, proxy, fate, err)
			}
			if tags := tailTags(t, tail); len(tags) != 3 || tags[0] != 0 || tags[1] != unknown || tags[2] <= unknown {
				t.Fatalf("unknown tag %d, host %q: tags %v, want 0, %d, then a filler above it", unknown, proxy, tags, unknown)
			}
			got := kmsg.NewPtrFetchResponse()
			got.Version = 16
			if err := got.ReadFrom(append(prefix, tail...)); err != nil || len(got.Brokers) != 2 {
				t.Fatalf("unknown tag %d: %d brokers, %v", unknown, len(got.Brokers), err)
			}
		}
	}
}
