package proxy

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// ErrUpstreamNeedsCredentials is returned by Discover when the upstream
// answers but will not list its brokers to a caller that has not
// authenticated, as a SASL listener does, and the proxy holds no
// credentials of its own: clients bring theirs (SASL pass-through). The
// upstream counts as answering; node listeners open when the metadata a
// client receives first names them.
var ErrUpstreamNeedsCredentials = errors.New("the upstream lists its brokers only to authenticated clients, and SASL passes through")

// discoverUnauthenticated runs after a failed discovery when the proxy
// does not authenticate upstream. ApiVersions is the one request a Kafka
// SASL listener answers before authentication, so an upstream that answers
// it is alive and only withholds its metadata.
func (p *Proxy) discoverUnauthenticated(ctx context.Context, upstreams []string) error {
	var errs []error
	for _, addr := range upstreams {
		err := p.answersApiVersions(ctx, addr)
		if err == nil {
			return nil
		}
		errs = append(errs, err)
	}
	return oneLine(errs...)
}

// answersApiVersions sends one ApiVersions v0 request to addr over the
// proxy's upstream dial (TLS included) and checks the answer.
func (p *Proxy) answersApiVersions(ctx context.Context, addr string) error {
	_, err := p.probeVersions(ctx, addr, 0)
	return err
}

// probeVersions sends one ApiVersions request of version to addr over the
// proxy's upstream dial, in its own name, and returns the answer; an
// upstream that does not know the version answers with its v0 body.
func (p *Proxy) probeVersions(ctx context.Context, addr string, version int16) (*kmsg.ApiVersionsResponse, error) {
	ctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	nc, _, err := p.dialSecure(ctx, addr, slices.Contains(p.current().Upstreams, addr))
	if err != nil {
		return nil, err
	}
	defer nc.Close()
	deadline, _ := ctx.Deadline()
	nc.SetDeadline(deadline)
	stop := context.AfterFunc(ctx, func() { nc.SetDeadline(time.Now()) })
	defer stop()

	const corr = 1
	req := kmsg.NewPtrApiVersionsRequest()
	req.Version = version
	req.ClientSoftwareName, req.ClientSoftwareVersion = "inorder", "1"
	frame := kmsg.NewRequestFormatter(kmsg.FormatterClientID("inorder")).AppendRequest(nil, req, corr)
	if _, err := nc.Write(frame); err != nil {
		return nil, fmt.Errorf("api versions to %s: %w", addr, err)
	}
	var head [8]byte
	if _, err := io.ReadFull(nc, head[:]); err != nil {
		return nil, fmt.Errorf("api versions from %s: %w", addr, err)
	}
	size := int32(binary.BigEndian.Uint32(head[:4]))
	if size < 4 || size > 1<<20 {
		return nil, fmt.Errorf("%w: api versions from %s: frame of %d bytes", ErrUpstreamProtocol, addr, size)
	}
	if got := int32(binary.BigEndian.Uint32(head[4:])); got != corr {
		return nil, fmt.Errorf("%w: api versions from %s: correlation id %d", ErrUpstreamProtocol, addr, got)
	}
	body := make([]byte, size-4)
	if _, err := io.ReadFull(nc, body); err != nil {
		return nil, fmt.Errorf("api versions from %s: %w", addr, err)
	}
	resp := kmsg.NewPtrApiVersionsResponse()
	resp.Version = version
	if len(body) >= 2 && int16(binary.BigEndian.Uint16(body)) == kerr.UnsupportedVersion.Code {
		resp.Version = 0
	}
	if err := resp.ReadFrom(body); err != nil {
		return nil, fmt.Errorf("%w: api versions from %s: %v", ErrUpstreamProtocol, addr, err)
	}
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil && !errors.Is(err, kerr.UnsupportedVersion) {
		return nil, fmt.Errorf("api versions from %s: %w", addr, err)
	}
	return resp, nil
}
