package splitmerge

import (
	"bytes"
	"reflect"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// oneOfEach builds a request of key at version with one entry in every
// list, so that an error response has an entry to answer at every level.
func oneOfEach(key, version int16) kmsg.Request {
	return genRequest(&source{b: bytes.Repeat([]byte{2}, 1<<16)}, key, version)
}

// TestErrorResponseEveryKey: for every key and version kmsg knows, the
// error response is of the request's key and version, sets every error
// code it builds (but Fetch's and Metadata's top-level ones, which speak
// of sessions and rebootstrapping), and the client, decoding it with
// kmsg, reads the code somewhere.
func TestErrorResponseEveryKey(t *testing.T) {
	const code, msg = 77, "why"
	for k := range int16(200) {
		if kmsg.RequestForKey(k) == nil {
			continue
		}
		for _, v := range versions(kmsg.RequestForKey(k)) {
			req := oneOfEach(k, v)
			name := kmsg.NameForKey(k)
			resp := ErrorResponse(req, code, msg)
			if resp.Key() != k || resp.GetVersion() != v {
				t.Fatalf("%s v%d: response %s v%d", name, v, kmsg.NameForKey(resp.Key()), resp.GetVersion())
			}
			top := reflect.ValueOf(resp).Elem()
			eachCodeField(top, true, func(c int16, atTop bool) {
				if c != code && !(atTop && (k == 1 || k == 3)) {
					t.Errorf("%s v%d: an error code left at %d", name, v, c)
				}
			})
			read := 0
			eachCode(reflect.ValueOf(roundTripResponse(resp)), func(c int16) {
				if c == code {
					read++
				}
			})
			if read == 0 {
				t.Errorf("%s v%d: the client reads no error in %+v", name, v, roundTripResponse(resp))
			}
		}
	}
}

// eachCodeField calls fn with every ErrorCode field of v and whether it is
// the response's own (top level).
func eachCodeField(v reflect.Value, top bool, fn func(int16, bool)) {
	switch v.Kind() {
	case reflect.Pointer:
		if !v.IsNil() {
			eachCodeField(v.Elem(), false, fn)
		}
	case reflect.Slice:
		for i := range v.Len() {
			eachCodeField(v.Index(i), false, fn)
		}
	case reflect.Struct:
		for i := range v.NumField() {
			if v.Type().Field(i).Name == "ErrorCode" {
				fn(int16(v.Field(i).Int()), top)
				continue
			}
			eachCodeField(v.Field(i), false, fn)
		}
	}
}

// TestEveryKeyClassified: every key kmsg knows is either routed or
// refused with a reason of its own, never both, so a kmsg upgrade that
// adds a key fails here until the key is classified.
func TestEveryKeyClassified(t *testing.T) {
	for k := range int16(200) {
		if kmsg.RequestForKey(k) == nil {
			if _, ok := classes[k]; ok {
				t.Errorf("key %d classified, but kmsg does not know it", k)
			}
			continue
		}
		_, routed := classes[k]
		_, refused := refusals[k]
		if routed == refused {
			t.Errorf("%s (%d): routed %v, refused %v", kmsg.NameForKey(k), k, routed, refused)
		}
	}
}
