package wire

import (
	"bytes"
	"reflect"
	"testing"

	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// withTags returns the body of resp with its tag section replaced by
// section: resp must have nothing after its topics but its tag section.
func withTags(t *testing.T, resp *kmsg.FetchResponse, section []byte) []byte {
	t.Helper()
	bare := *resp
	bare.Brokers, bare.UnknownTags = nil, kmsg.Tags{}
	body := bare.AppendTo(nil)
	return append(body[:len(body)-1], section...)
}

// TestPadTags: a padded tag section has exactly the length asked for, and
// kmsg reads the same endpoints and unknown tags from it, plus the
// filler; only one or two bytes of room cannot be filled.
func TestPadTags(t *testing.T) {
	resp := kmsg.NewPtrFetchResponse()
	resp.Version = 16
	resp.Brokers = brokers(func(id int32, host string, port int32, rack *string) kmsg.FetchResponseBroker {
		return kmsg.FetchResponseBroker{NodeID: id, Host: host, Port: port, Rack: rack}
	})
	resp.UnknownTags.Set(3, []byte("kept"))
	full := resp.AppendTo(nil)
	bare := withTags(t, resp, []byte{0})
	section := full[len(bare)-1:]
	sizes := []int{}
	for n := len(section); n < len(section)+300; n++ {
		sizes = append(sizes, n)
	}
	sizes = append(sizes, len(section)+16384, len(section)+16385, len(section)+16386, len(section)+16387, 70000)
	for _, n := range sizes {
		out, ok := PadTags(section, n)
		room := n - len(section)
		if !ok {
			if room == 1 || room == 2 {
				continue
			}
			t.Fatalf("%d bytes of room: not padded", room)
		}
		if room == 1 || room == 2 {
			t.Fatalf("%d bytes of room padded, which no filler fits", room)
		}
		if len(out) != n {
			t.Fatalf("padded to %d bytes, asked %d", len(out), n)
		}
		got := kmsg.NewPtrFetchResponse()
		got.Version = 16
		if err := got.ReadFrom(withTags(t, resp, out)); err != nil {
			t.Fatalf("%d bytes of room: kmsg: %v", room, err)
		}
		if !reflect.DeepEqual(got.Brokers, resp.Brokers) {
			t.Fatalf("%d bytes of room: brokers %+v, want %+v", room, got.Brokers, resp.Brokers)
		}
		want := 1
		if room > 0 {
			want = 2
		}
		if got.UnknownTags.Len() != want {
			t.Fatalf("%d bytes of room: %d unknown tags, want %d", room, got.UnknownTags.Len(), want)
		}
		got.UnknownTags.Each(func(tag uint32, val []byte) {
			if tag == 3 && !bytes.Equal(val, []byte("kept")) {
				t.Fatalf("tag 3 holds %q", val)
			}
		})
	}
	if _, ok := PadTags(section, len(section)-1); ok {
		t.Fatal("a section was padded to less than its length")
	}
}

// TestFillerTags: a section of nothing but a filler reads as no endpoints
// at every length it can take.
func TestFillerTags(t *testing.T) {
	resp := kmsg.NewPtrFetchResponse()
	resp.Version = 17
	for n := range 20000 {
		out, ok := FillerTags(n)
		if ok != (n == 1 || n >= 4) {
			t.Fatalf("%d bytes: filled %v", n, ok)
		}
		if !ok {
			continue
		}
		if len(out) != n {
			t.Fatalf("filled %d bytes, asked %d", len(out), n)
		}
		got := kmsg.NewPtrFetchResponse()
		got.Version = 17
		if err := got.ReadFrom(withTags(t, resp, out)); err != nil {
			t.Fatalf("%d bytes: kmsg: %v", n, err)
		}
		if len(got.Brokers) != 0 || got.UnknownTags.Len() != min(n-1, 1) {
			t.Fatalf("%d bytes: %d brokers, %d unknown tags", n, len(got.Brokers), got.UnknownTags.Len())
		}
		if e, err := ScanFetchTail(17, out); err != nil || e.Count != 0 {
			t.Fatalf("%d bytes: scanned %+v, %v", n, e, err)
		}
	}
}

// tagNumbers returns the tags of a tag section in the order it holds them.
func tagNumbers(t *testing.T, section []byte) []uint32 {
	t.Helper()
	count, w := kbin.Uvarint(section)
	if w <= 0 {
		t.Fatalf("tag section %x: no count", section)
	}
	rest := section[w:]
	var tags []uint32
	for range count {
		tag, tw := kbin.Uvarint(rest)
		size, sw := kbin.Uvarint(rest[max(tw, 0):])
		if tw <= 0 || sw <= 0 || int(size) > len(rest)-tw-sw {
			t.Fatalf("tag section %x: field %d does not read", section, len(tags))
		}
		tags = append(tags, tag)
		rest = rest[tw+sw+int(size):]
	}
	return tags
}

// increasing reports whether tags are in strictly increasing order, as
// tagged fields must be written (KIP-482).
func increasing(tags []uint32) bool {
	for i := 1; i < len(tags); i++ {
		if tags[i] <= tags[i-1] {
			return false
		}
	}
	return true
}

// TestPadTagsAboveHighestTag: a section already holding a tag at or above
// a filler's (an unknown tag of a newer broker, another proxy's filler)
// is padded with a filler above it, so that its tags stay in increasing
// order, at every length a filler that high can make; with a tag at the
// very top nothing fits.
func TestPadTagsAboveHighestTag(t *testing.T) {
	for _, c := range []struct {
		highest uint32
		minFill int // the smallest filler above it: tag and size bytes
	}{
		{3, 3}, {16382, 3}, {16383, 4}, {20000, 4}, {1<<21 - 1, 5}, {1<<28 - 2, 5}, {1<<28 - 1, 6},
	} {
		resp := kmsg.NewPtrFetchResponse()
		resp.Version = 16
		resp.Brokers = brokers(func(id int32, host string, port int32, rack *string) kmsg.FetchResponseBroker {
			return kmsg.FetchResponseBroker{NodeID: id, Host: host, Port: port, Rack: rack}
		})
		resp.UnknownTags.Set(c.highest, []byte("kept"))
		full := resp.AppendTo(nil)
		bare := withTags(t, resp, []byte{0})
		section := full[len(bare)-1:]
		for room := 0; room < 20000; room++ {
			out, ok := PadTags(section, len(section)+room)
			if !ok {
				if room == 0 || (room >= c.minFill && c.highest < 1<<28-1) {
					t.Fatalf("highest tag %d, %d bytes of room: not padded", c.highest, room)
				}
				continue
			}
			if room > 0 && room < c.minFill {
				t.Fatalf("highest tag %d: %d bytes of room padded, which no filler above it fits", c.highest, room)
			}
			if tags := tagNumbers(t, out); !increasing(tags) {
				t.Fatalf("highest tag %d, %d bytes of room: tags %v", c.highest, room, tags)
			}
			got := kmsg.NewPtrFetchResponse()
			got.Version = 16
			if err := got.ReadFrom(withTags(t, resp, out)); err != nil {
				t.Fatalf("highest tag %d, %d bytes of room: kmsg: %v", c.highest, room, err)
			}
			if !reflect.DeepEqual(got.Brokers, resp.Brokers) || got.UnknownTags.Len() != 1+min(room, 1) {
				t.Fatalf("highest tag %d, %d bytes of room: %+v, %d unknown tags", c.highest, room, got.Brokers, got.UnknownTags.Len())
			}
		}
	}
	resp := kmsg.NewPtrFetchResponse()
	resp.Version = 16
	resp.UnknownTags.Set(1<<31-1, nil)
	full := resp.AppendTo(nil)
	section := full[len(withTags(t, resp, []byte{0}))-1:]
	for room := range 300 {
		if _, ok := PadTags(section, len(section)+room); ok != (room == 0) {
			t.Fatalf("a section holding the highest filler tag, %d bytes of room: padded %v", room, ok)
		}
	}
}
