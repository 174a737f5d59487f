package wire

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"runtime"
	"testing"
	"testing/iotest"

	"github.com/twmb/franz-go/pkg/kmsg"
)

func request(req kmsg.Request, corr int32, clientID *string) []byte {
	opts := []kmsg.RequestFormatterOpt{}
	if clientID != nil {
		opts = append(opts, kmsg.FormatterClientID(*clientID))
	}
	return kmsg.NewRequestFormatter(opts...).AppendRequest(nil, req, corr)
}

func TestParseRequestHeaderMatchesKmsg(t *testing.T) {
	id := "client-1"
	for _, key := range []int16{0, 1, 3, 8, 18, 28, 60} {
		req := kmsg.RequestForKey(key)
		for v := int16(0); v <= req.MaxVersion(); v++ {
			req.SetVersion(v)
			for _, cid := range []*string{nil, &id} {
				f := request(req, 99, cid)
				h, err := ParseRequestHeader(f)
				if err != nil {
					t.Fatalf("key %d v%d: %v", key, v, err)
				}
				if h.Key != key || h.Version != v || h.Correlation != 99 {
					t.Fatalf("key %d v%d: parsed %+v", key, v, h)
				}
				body := req.AppendTo(nil)
				if !bytes.Equal(f[h.Body:], body) {
					t.Fatalf("key %d v%d clientID %v: body offset %d wrong", key, v, cid, h.Body)
				}
			}
		}
	}
}

func TestParseRequestHeaderErrors(t *testing.T) {
	f := request(kmsg.NewPtrMetadataRequest(), 1, nil)
	binary.BigEndian.PutUint16(f[4:], 30000)
	if _, err := ParseRequestHeader(f); !errors.Is(err, ErrUnknownKey) {
		t.Fatalf("unknown key: %v", err)
	}
	f = request(kmsg.NewPtrMetadataRequest(), 1, nil)
	binary.BigEndian.PutUint16(f[6:], 999)
	if _, err := ParseRequestHeader(f); !errors.Is(err, ErrUnsupportedVersion) {
		t.Fatalf("high version: %v", err)
	}
	f = request(kmsg.NewPtrMetadataRequest(), 1, nil)
	binary.BigEndian.PutUint16(f[12:], 5000)
	if _, err := ParseRequestHeader(f); !errors.Is(err, ErrMalformedHeader) {
		t.Fatalf("client id past the end: %v", err)
	}
	if _, err := ParseRequestHeader(f[:9]); !errors.Is(err, ErrMalformedHeader) {
		t.Fatalf("short: %v", err)
	}
}

func TestReadFrame(t *testing.T) {
	var lb [4]byte
	f := request(kmsg.NewPtrApiVersionsRequest(), 5, nil)
	// One byte at a time: ReadFrame must not depend on read sizes.
	b, err := ReadFrame(iotest.OneByteReader(bytes.NewReader(f)), &lb, MinRequestFrame, 1<<20)
	if err != nil || !bytes.Equal(b.B, f) {
		t.Fatalf("got %v %v", b, err)
	}
	Put(b)
	if _, err := ReadFrame(bytes.NewReader(nil), &lb, MinRequestFrame, 1<<20); err != io.EOF {
		t.Fatalf("empty: %v", err)
	}
	if _, err := ReadFrame(bytes.NewReader(f[:2]), &lb, MinRequestFrame, 1<<20); !errors.Is(err, ErrTruncated) {
		t.Fatalf("short prefix: %v", err)
	}
	if _, err := ReadFrame(bytes.NewReader(f[:len(f)-1]), &lb, MinRequestFrame, 1<<20); !errors.Is(err, ErrTruncated) {
		t.Fatalf("short body: %v", err)
	}
	if _, err := ReadFrame(bytes.NewReader(f), &lb, MinRequestFrame, 8); !errors.Is(err, ErrFrameTooLarge) {
		t.Fatalf("limit: %v", err)
	}
	// Rejecting a 2 GiB prefix must allocate nothing near its size.
	huge := []byte{0x7f, 0xff, 0xff, 0xff}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for range 10 {
		ReadFrame(bytes.NewReader(huge), &lb, MinRequestFrame, 100<<20)
	}
	runtime.ReadMemStats(&after)
	if n := after.TotalAlloc - before.TotalAlloc; n > 64<<10 {
		t.Fatalf("rejecting oversized prefixes allocated %d bytes", n)
	}
}

func TestPoolClasses(t *testing.T) {
	for _, n := range []int{0, 1, 511, 512, 513, 4096, 1 << 20, 1<<20 + 1} {
		b := Get(n)
		if len(b.B) != n || cap(b.B) < n {
			t.Fatalf("Get(%d): len %d cap %d", n, len(b.B), cap(b.B))
		}
		Put(b)
	}
}

// FuzzRequestStream feeds arbitrary bytes as a client stream, split at
// every point, through ReadFrame and ParseRequestHeader: nothing may panic,
// a frame longer than the limit is never allocated, and a parsed header's
// body offset lies within its frame.
func FuzzRequestStream(f *testing.F) {
	id := "c"
	for _, req := range []kmsg.Request{kmsg.NewPtrMetadataRequest(), kmsg.NewPtrApiVersionsRequest(), kmsg.NewPtrProduceRequest(), kmsg.NewPtrFetchRequest()} {
		for v := int16(0); v <= req.MaxVersion(); v += 3 {
			req.SetVersion(v)
			f.Add(request(req, 7, &id), uint(3))
		}
	}
	f.Add([]byte{0x7f, 0xff, 0xff, 0xff}, uint(1))
	f.Add([]byte{0, 0, 0, 10, 0, 3, 0, 1, 0, 0, 0, 1, 0xff}, uint(5))
	f.Fuzz(func(t *testing.T, data []byte, split uint) {
		const max = 1 << 16
		var lb [4]byte
		at := int(split % uint(len(data)+1))
		r := io.MultiReader(bytes.NewReader(data[:at]), bytes.NewReader(data[at:]))
		for {
			b, err := ReadFrame(r, &lb, MinRequestFrame, max)
			if err != nil {
				return
			}
			if len(b.B) > 4+max {
				t.Fatalf("frame of %d bytes beyond the limit", len(b.B))
			}
			h, err := ParseRequestHeader(b.B)
			if err == nil && (h.Body < 12 || h.Body > len(b.B)) {
				t.Fatalf("body offset %d outside frame of %d", h.Body, len(b.B))
			}
			Put(b)
		}
	})
}

// FuzzResponseHeader checks the response header walk on arbitrary frames.
func FuzzResponseHeader(f *testing.F) {
	f.Add([]byte{0, 0, 0, 5, 0, 0, 0, 1, 0}, true)
	f.Add([]byte{0, 0, 0, 4, 0, 0, 0, 1}, false)
	f.Add([]byte{0, 0, 0, 9, 0, 0, 0, 1, 1, 0, 2, 0xaa, 0xbb}, true)
	f.Fuzz(func(t *testing.T, frame []byte, flexible bool) {
		off, err := ResponseBody(frame, flexible)
		if err == nil && (off < 8 || off > len(frame)) {
			t.Fatalf("body offset %d outside frame of %d", off, len(frame))
		}
	})
}

func BenchmarkReadFrame(b *testing.B) {
	f := request(kmsg.NewPtrMetadataRequest(), 1, nil)
	body := bytes.Repeat([]byte{1}, 16<<10)
	f = append(f, body...)
	SetLength(f)
	rd := bytes.NewReader(f)
	var lb [4]byte
	b.ReportAllocs()
	b.SetBytes(int64(len(f)))
	for b.Loop() {
		rd.Reset(f)
		buf, err := ReadFrame(rd, &lb, MinRequestFrame, 1<<20)
		if err != nil {
			b.Fatal(err)
		}
		Put(buf)
	}
}

func BenchmarkParseRequestHeader(b *testing.B) {
	id := "a-typical-client-id"
	req := kmsg.NewPtrProduceRequest()
	req.Version = 11
	f := request(req, 1, &id)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := ParseRequestHeader(f); err != nil {
			b.Fatal(err)
		}
	}
}
