package hostile

import (
	"encoding/binary"
	"fmt"
	"io"

	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// maxFrame is Kafka's default socket.request.max.bytes; a larger length
// prefix is refused before anything is allocated.
const maxFrame = 100 << 20

// Shortest frames past the length prefix: a request header's key, version
// and correlation id; a response's correlation id.
const (
	minRequest  = 8
	minResponse = 4
)

// readFrame reads one length-prefixed frame of at least minLen bytes and
// returns it whole, prefix included, so that it can be forwarded byte for
// byte.
func readFrame(r io.Reader, minLen int32) ([]byte, error) {
	var size [4]byte
	if _, err := io.ReadFull(r, size[:]); err != nil {
		return nil, err
	}
	n := int32(binary.BigEndian.Uint32(size[:]))
	if n < minLen || n > maxFrame {
		return nil, fmt.Errorf("%w: frame length %d", ErrBadFrame, n)
	}
	frame := make([]byte, 4+int(n))
	copy(frame, size[:])
	if _, err := io.ReadFull(r, frame[4:]); err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return nil, err
	}
	return frame, nil
}

// request is what the backends need to know about a request frame.
type request struct {
	frame   []byte
	key     int16
	version int16
	corr    int32
	// clientID is the header's client id, for counts per client.
	clientID string
	// noResponse is set for acks=0 Produce, which Kafka never answers.
	noResponse bool
}

// parseRequest reads the request header. It rejects keys kmsg does not
// know, because kfake panics the whole test binary on them.
func parseRequest(frame []byte) (request, error) {
	r := kbin.Reader{Src: frame[4:]}
	req := request{frame: frame, key: r.Int16(), version: r.Int16(), corr: r.Int32()}
	kreq := kmsg.RequestForKey(req.key)
	if kreq == nil {
		return req, fmt.Errorf("%w: api key %d", ErrUnknownKey, req.key)
	}
	kreq.SetVersion(req.version)
	// ControlledShutdown v0 predates the client id.
	if req.key != 7 || req.version != 0 {
		if id := r.NullableString(); id != nil {
			req.clientID = *id
		}
	}
	if kreq.IsFlexible() {
		kmsg.SkipTags(&r)
	}
	if !r.Ok() {
		return req, fmt.Errorf("%w: truncated header", ErrBadFrame)
	}
	if p, ok := kreq.(*kmsg.ProduceRequest); ok {
		if err := p.ReadFrom(r.Src); err != nil {
			return req, fmt.Errorf("%w: produce v%d body: %v", ErrBadFrame, req.version, err)
		}
		req.noResponse = p.Acks == 0
	}
	return req, nil
}

// readRequest reads and parses one request frame.
func readRequest(r io.Reader) (request, error) {
	frame, err := readFrame(r, minRequest)
	if err != nil {
		return request{}, err
	}
	return parseRequest(frame)
}

// responseCorr returns the correlation id of a response frame.
func responseCorr(frame []byte) int32 {
	return int32(binary.BigEndian.Uint32(frame[4:8]))
}
