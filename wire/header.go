package wire

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Errors for headers the proxy cannot use. Each closes the one connection.
var (
	// ErrMalformedHeader: the header does not parse.
	ErrMalformedHeader = errors.New("malformed header")
	// ErrUnknownKey: the API key is not one the proxy can parse.
	ErrUnknownKey = errors.New("unknown api key")
	// ErrUnsupportedVersion: the version is above what the proxy can parse.
	ErrUnsupportedVersion = errors.New("unsupported api version")
)

// ApiVersionsKey is the key of ApiVersions, whose response header is always
// version 0 and which a broker answers even at versions it does not know.
const ApiVersionsKey = 18

// keyInfo is what the proxy knows of an API key, from kmsg, computed once so
// the hot path allocates nothing.
type keyInfo struct {
	known    bool
	max      int16
	flexFrom int16 // first flexible version, or max+1
}

var keys = func() []keyInfo {
	var out []keyInfo
	for k := int16(0); k < 1024; k++ {
		r := kmsg.RequestForKey(k)
		if r == nil {
			continue
		}
		for int(k) >= len(out) {
			out = append(out, keyInfo{})
		}
		info := keyInfo{known: true, max: r.MaxVersion(), flexFrom: r.MaxVersion() + 1}
		for v := int16(0); v <= info.max; v++ {
			r.SetVersion(v)
			if r.IsFlexible() {
				info.flexFrom = v
				break
			}
		}
		out[k] = info
	}
	return out
}()

// MaxVersion returns the highest version of key the proxy can parse.
func MaxVersion(key int16) (int16, bool) {
	if key < 0 || int(key) >= len(keys) || !keys[key].known {
		return 0, false
	}
	return keys[key].max, true
}

// Flexible reports whether key at version uses flexible encoding. For a
// version above the known maximum it assumes the newest encoding.
func Flexible(key, version int16) bool {
	if key < 0 || int(key) >= len(keys) || !keys[key].known {
		return false
	}
	return version >= keys[key].flexFrom
}

// RequestHeader is the parsed header of a request frame.
type RequestHeader struct {
	Key         int16
	Version     int16
	Correlation int32
	// Body is the offset of the body in the frame (prefix included).
	Body int
}

// Flexible reports whether the request uses flexible encoding.
func (h RequestHeader) Flexible() bool { return Flexible(h.Key, h.Version) }

// ResponseFlexible reports whether the response header carries tags.
func (h RequestHeader) ResponseFlexible() bool {
	return h.Key != ApiVersionsKey && h.Flexible()
}

// Correlation offsets within a frame, prefix included.
const (
	requestCorrelation  = 8
	responseCorrelation = 4
)

// ParseRequestHeader parses the header of frame (prefix included). For a
// known key above the supported version it returns the header with
// ErrUnsupportedVersion, so the caller can answer an ApiVersions probe.
func ParseRequestHeader(frame []byte) (RequestHeader, error) {
	if len(frame) < 4+MinRequestFrame {
		return RequestHeader{}, fmt.Errorf("%w: %d bytes", ErrMalformedHeader, len(frame))
	}
	h := RequestHeader{
		Key:         int16(binary.BigEndian.Uint16(frame[4:])),
		Version:     int16(binary.BigEndian.Uint16(frame[6:])),
		Correlation: int32(binary.BigEndian.Uint32(frame[requestCorrelation:])),
	}
	max, ok := MaxVersion(h.Key)
	if !ok {
		return h, fmt.Errorf("%w: %d", ErrUnknownKey, h.Key)
	}
	if h.Version < 0 {
		return h, fmt.Errorf("%w: %s v%d", ErrUnsupportedVersion, kmsg.NameForKey(h.Key), h.Version)
	}
	r := kbin.Reader{Src: frame[12:]}
	if n := r.Int16(); n > 0 { // client id: nullable, never compact
		r.Span(int(n))
	}
	if h.Flexible() {
		skipTags(&r)
	}
	if !r.Ok() {
		return h, fmt.Errorf("%w: %s v%d", ErrMalformedHeader, kmsg.NameForKey(h.Key), h.Version)
	}
	h.Body = len(frame) - len(r.Src)
	if h.Version > max {
		return h, fmt.Errorf("%w: %s v%d (max v%d)", ErrUnsupportedVersion, kmsg.NameForKey(h.Key), h.Version, max)
	}
	return h, nil
}

// SetRequestCorrelation overwrites the correlation id of a request frame.
func SetRequestCorrelation(frame []byte, id int32) {
	binary.BigEndian.PutUint32(frame[requestCorrelation:], uint32(id))
}

// ResponseCorrelation returns the correlation id of a response frame.
func ResponseCorrelation(frame []byte) int32 {
	return int32(binary.BigEndian.Uint32(frame[responseCorrelation:]))
}

// SetResponseCorrelation overwrites the correlation id of a response frame.
func SetResponseCorrelation(frame []byte, id int32) {
	binary.BigEndian.PutUint32(frame[responseCorrelation:], uint32(id))
}

// ResponseBody returns the offset of the body in a response frame (prefix
// included), skipping the header's tags when flexible.
func ResponseBody(frame []byte, flexible bool) (int, error) {
	if len(frame) < 4+MinResponseFrame {
		return 0, fmt.Errorf("%w: response of %d bytes", ErrMalformedHeader, len(frame))
	}
	if !flexible {
		return 8, nil
	}
	r := kbin.Reader{Src: frame[8:]}
	skipTags(&r)
	if !r.Ok() {
		return 0, fmt.Errorf("%w: response header tags", ErrMalformedHeader)
	}
	return len(frame) - len(r.Src), nil
}

// AppendResponse appends a whole response frame: prefix, header with
// correlation id (and an empty tag section when flexible), then body as
// encoded by appendBody.
func AppendResponse(dst []byte, correlation int32, flexible bool, appendBody func([]byte) []byte) []byte {
	start := len(dst)
	dst = append(dst, 0, 0, 0, 0)
	dst = binary.BigEndian.AppendUint32(dst, uint32(correlation))
	if flexible {
		dst = append(dst, 0)
	}
	dst = appendBody(dst)
	SetLength(dst[start:])
	return dst
}

// AppendRequest appends a whole request frame: prefix, the header fields
// copied from the original frame's header (orig[4:h.Body]), then the body.
func AppendRequest(dst []byte, orig []byte, h RequestHeader, appendBody func([]byte) []byte) []byte {
	start := len(dst)
	dst = append(dst, orig[:h.Body]...)
	dst = appendBody(dst)
	SetLength(dst[start:])
	return dst
}

// skipTags skips a tagged-field section. It is kmsg.SkipTags on the
// concrete reader, which keeps the reader on the stack.
func skipTags(r *kbin.Reader) {
	for n := r.Uvarint(); n > 0 && r.Ok(); n-- {
		r.Uvarint()
		r.Span(int(r.Uvarint()))
	}
}
