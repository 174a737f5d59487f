package rewrite

import (
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/inorder-proxy/inorder/wire"
)

// A Fetch response that streams to a client has sent its length before
// its tag section, where its KIP-951 endpoints are, comes by; that section
// is rewritten in the length it arrived in.

// TailFate says what FetchTail did.
type TailFate uint8

const (
	// TailAsIs: the tail names no endpoint and is left as it is.
	TailAsIs TailFate = iota
	// TailRewritten: its endpoints are rewritten, padded to its length
	// with a tag clients skip.
	TailRewritten
	// TailEndpointsDropped: the rewritten endpoints do not fit its
	// length; it holds a tag clients skip and no endpoint, so they learn
	// where partitions moved from Metadata, as before KIP-951.
	TailEndpointsDropped
)

// ErrTail: a Fetch response's tag section does not read as kmsg reads it.
var ErrTail = errors.New("rewrite: malformed Fetch response tag section")

// FetchTail rewrites in place tail, the end of a Fetch response at
// version after its topics (its tag section, then whatever kmsg ignores),
// mapping every endpoint through m as Response does, and keeps its length:
// the section is decoded with kmsg, rewritten, encoded again and padded
// with a filler tag (wire.PadTags); where that cannot make the length, it
// becomes a filler alone. On error tail may be partly rewritten and must
// not be forwarded.
func FetchTail(version int16, tail []byte, m Mapper) (TailFate, error) {
	e, err := wire.ScanFetchTail(version, tail)
	if err != nil {
		return TailAsIs, fmt.Errorf("%w: Fetch v%d: %v", ErrTail, version, err)
	}
	if e.Count == 0 {
		return TailAsIs, nil
	}
	// Decoded behind the fields of an empty response, which kmsg encodes
	// the same way whatever follows them; only flexible versions, which
	// end with a tag section, name endpoints.
	bare := kmsg.NewPtrFetchResponse()
	bare.Version = version
	prefix := bare.AppendTo(nil)
	prefix = prefix[:len(prefix)-1] // its empty tag section
	resp := kmsg.NewPtrFetchResponse()
	resp.Version = version
	if err := resp.ReadFrom(append(prefix, tail...)); err != nil {
		return TailAsIs, fmt.Errorf("%w: Fetch v%d: %v", ErrTail, version, err)
	}
	if err := fetch(resp, m); err != nil {
		return TailAsIs, err
	}
	fate := TailRewritten
	out, ok := wire.PadTags(resp.AppendTo(nil)[len(prefix):], len(tail))
	if !ok {
		fate = TailEndpointsDropped
		// A section naming an endpoint has fifteen bytes at least,
		// which a filler always fits.
		out, _ = wire.FillerTags(len(tail))
	}
	copy(tail, out)
	return fate, nil
}
