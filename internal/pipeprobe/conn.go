package pipeprobe

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"time"

	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/inorder-proxy/inorder/wire"
)

// maxFrame is Kafka's default socket.request.max.bytes; a response that
// claims more is refused before anything is allocated.
const maxFrame = 100 << 20

// conn is one client connection whose blocking I/O ends when its context
// does.
type conn struct {
	ctx  context.Context
	c    net.Conn
	stop func() bool
}

func dial(ctx context.Context, addr string) (*conn, error) {
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	// A deadline in the past is the one way to interrupt a blocked Read
	// or Write from another goroutine without closing the socket under it.
	stop := context.AfterFunc(ctx, func() { c.SetDeadline(time.Unix(1, 0)) })
	return &conn{ctx: ctx, c: c, stop: stop}, nil
}

func (c *conn) close() {
	c.stop()
	c.c.Close()
}

// wrap prefers the context's error, which explains an I/O error caused by
// the deadline dial sets on cancellation.
func (c *conn) wrap(err error) error {
	if cerr := c.ctx.Err(); cerr != nil {
		return fmt.Errorf("%w (%v)", cerr, err)
	}
	return err
}

// readResponse reads one response frame and returns its correlation id and
// everything after it.
func (c *conn) readResponse() (int32, []byte, error) {
	var size [4]byte
	if _, err := io.ReadFull(c.c, size[:]); err != nil {
		return 0, nil, c.wrap(err)
	}
	n := int32(binary.BigEndian.Uint32(size[:]))
	if n < 4 || n > maxFrame {
		if nk := wire.Sniff(size); nk != nil {
			return 0, nil, fmt.Errorf("%w: %w", ErrMalformed, nk)
		}
		return 0, nil, fmt.Errorf("%w: frame length %d", ErrMalformed, n)
	}
	frame := make([]byte, n)
	if _, err := io.ReadFull(c.c, frame); err != nil {
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return 0, nil, c.wrap(err)
	}
	return int32(binary.BigEndian.Uint32(frame)), frame[4:], nil
}

// parseResponse decodes a response body for req. The response header has
// tagged fields when the request is flexible, except for ApiVersions,
// whose response header stays v0 so that any client can read it.
func parseResponse(req kmsg.Request, body []byte) (kmsg.Response, error) {
	r := kbin.Reader{Src: body}
	if req.IsFlexible() && req.Key() != 18 {
		kmsg.SkipTags(&r)
		if !r.Ok() {
			return nil, fmt.Errorf("%w: key %d v%d: truncated header", ErrMalformed, req.Key(), req.GetVersion())
		}
	}
	resp := req.ResponseKind()
	// A broker that does not know the requested ApiVersions version
	// answers UNSUPPORTED_VERSION with a v0 body.
	if req.Key() == 18 && len(r.Src) >= 2 && int16(binary.BigEndian.Uint16(r.Src)) == kerr.UnsupportedVersion.Code {
		resp.SetVersion(0)
	}
	if err := resp.ReadFrom(r.Src); err != nil {
		return nil, fmt.Errorf("%w: key %d v%d: %v", ErrMalformed, req.Key(), req.GetVersion(), err)
	}
	return resp, nil
}

// Do sends req alone on a new connection to addr and returns the parsed
// response. req's version must be set; nothing is negotiated. It must not
// be an acks=0 Produce, which has no response.
func Do(ctx context.Context, addr string, req kmsg.Request) (kmsg.Response, error) {
	// The correlation id's bytes are CR LF CR LF. A broker does not care;
	// an HTTP server reading the frame as a request sees its first line
	// and headers end there and answers 400 at once, where it would
	// otherwise wait for a line end until its header timeout: a port that
	// is not Kafka's says so as soon as one that is answers.
	const corr = 0x0d0a0d0a
	c, err := dial(ctx, addr)
	if err != nil {
		return nil, err
	}
	defer c.close()
	frame := kmsg.NewRequestFormatter(kmsg.FormatterClientID("pipeprobe")).AppendRequest(nil, req, corr)
	if _, err := c.c.Write(frame); err != nil {
		return nil, c.wrap(err)
	}
	got, body, err := c.readResponse()
	if err != nil {
		return nil, err
	}
	if got != corr {
		return nil, fmt.Errorf("%w: got %d, sent %d", ErrUnknownCorrelation, got, corr)
	}
	return parseResponse(req, body)
}

// CreateTopic creates topic with the given partitions and replication
// factor 1 through the broker at addr. A topic that already exists is an
// error matching kerr.TopicAlreadyExists.
func CreateTopic(ctx context.Context, addr, topic string, partitions int32) error {
	req := kmsg.NewPtrCreateTopicsRequest()
	req.Version = 5
	req.TimeoutMillis = 10_000
	t := kmsg.NewCreateTopicsRequestTopic()
	t.Topic = topic
	t.NumPartitions = partitions
	t.ReplicationFactor = 1
	req.Topics = append(req.Topics, t)
	kresp, err := Do(ctx, addr, req)
	if err != nil {
		return fmt.Errorf("pipeprobe: creating topic %q: %w", topic, err)
	}
	resp := kresp.(*kmsg.CreateTopicsResponse)
	if len(resp.Topics) != 1 {
		return fmt.Errorf("%w: creating topic %q: %d topics in response", ErrMalformed, topic, len(resp.Topics))
	}
	if err := kerr.ErrorForCode(resp.Topics[0].ErrorCode); err != nil {
		return fmt.Errorf("pipeprobe: creating topic %q: %w", topic, err)
	}
	return nil
}
