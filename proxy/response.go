package proxy

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/inorder-proxy/inorder/rewrite"
	"github.com/inorder-proxy/inorder/wire"
)

// response turns an upstream response frame into the client's: the
// client's correlation id, addresses rewritten, versions clamped. It takes
// ownership of buf and returns the frame to send.
func (c *conn) response(r *request, buf *wire.Buf) (*wire.Buf, error) {
	wire.SetResponseCorrelation(buf.B, r.hdr.Correlation)
	if r.throttle > 0 {
		out, err := c.throttledResponse(r, buf)
		if err != nil || r.hdr.Key == keyFetch {
			return out, err
		}
		buf = out
	}
	key, version := r.hdr.Key, r.hdr.Version
	if key == keySaslHandshake {
		c.noteHandshakeResponse(r, buf.B)
	}
	if r.forcedAck {
		r.failed = produceError(buf.B, r.hdr)
		return buf, nil
	}
	fix := c.p.fixup != nil && c.p.fixup.Needs(key, version)
	if !fix && r.fix == nil && !rewrite.Needs(key, version) {
		return buf, nil
	}
	if key == keyApiVersions {
		return c.apiVersionsResponse(r, buf)
	}
	flexible := r.hdr.ResponseFlexible()
	off, err := wire.ResponseBody(buf.B, flexible)
	if err != nil {
		wire.Put(buf)
		return nil, fmt.Errorf("%w: %v", ErrUpstreamProtocol, err)
	}
	if !fix && r.fix == nil && (key == keyProduce || key == keyFetch) {
		// Nearly every Produce and Fetch response carries no KIP-951
		// endpoints: learn that by scanning, and forward the frame
		// without decoding it. Endpoints, or a body the scanner cannot
		// read, go on to kmsg.
		if e, err := wire.ScanEndpoints(key, version, buf.B[off:]); err == nil && e.Count == 0 {
			return buf, nil
		}
	}
	resp := kmsg.ResponseForKey(key)
	resp.SetVersion(version)
	if err := resp.ReadFrom(buf.B[off:]); err != nil {
		wire.Put(buf)
		return nil, fmt.Errorf("%w: %s v%d response: %v", ErrUpstreamProtocol, kmsg.NameForKey(key), version, err)
	}
	c.p.auditLearn(resp)
	fixed := fix && c.p.fixup.Fix(resp)
	if r.fix != nil {
		r.fixResponse(resp)
		fixed = true
	}
	if !fixed && !carriesAddresses(resp) {
		return buf, nil
	}
	if err := rewrite.Response(resp, &c.p.nodes); err != nil {
		wire.Put(buf)
		return nil, rewriteError(key, version, err)
	}
	out := wire.AppendResponse(make([]byte, 0, len(buf.B)+64), r.hdr.Correlation, flexible, resp.AppendTo)
	wire.Put(buf)
	return &wire.Buf{B: out}, nil
}

// rewriteError is the connection's error for a response whose addresses
// could not be rewritten.
func rewriteError(key, version int16, err error) error {
	if errors.Is(err, ErrNodePort) {
		return fmt.Errorf("%s v%d response: %w", kmsg.NameForKey(key), version, err)
	}
	return fmt.Errorf("%w: %s v%d response: %v", ErrUpstreamProtocol, kmsg.NameForKey(key), version, err)
}

// carriesAddresses skips re-encoding Produce and Fetch responses whose
// KIP-951 endpoint list is empty, which is nearly all of them: a Fetch
// response holds records, and copying them would cost what the proxy saves.
func carriesAddresses(resp kmsg.Response) bool {
	switch r := resp.(type) {
	case *kmsg.ProduceResponse:
		return len(r.Brokers) > 0
	case *kmsg.FetchResponse:
		return len(r.Brokers) > 0
	}
	return true
}

// apiVersionsResponse clamps the advertised versions to what the proxy can
// parse and forward. A broker that does not know the requested version
// answers with a v0 body and UNSUPPORTED_VERSION (kroxylicious #2450), so
// the body is decoded at v0 in that case; the header is always v0.
func (c *conn) apiVersionsResponse(r *request, buf *wire.Buf) (*wire.Buf, error) {
	const off = 8
	if len(buf.B) < off+2 {
		wire.Put(buf)
		return nil, fmt.Errorf("%w: ApiVersions response of %d bytes", ErrUpstreamProtocol, len(buf.B))
	}
	resp := kmsg.NewPtrApiVersionsResponse()
	resp.Version = r.hdr.Version
	if int16(binary.BigEndian.Uint16(buf.B[off:])) == kerr.UnsupportedVersion.Code {
		resp.Version = 0
	}
	if err := resp.ReadFrom(buf.B[off:]); err != nil {
		wire.Put(buf)
		return nil, fmt.Errorf("%w: ApiVersions v%d response: %v", ErrUpstreamProtocol, resp.Version, err)
	}
	c.p.keepVersions(c.sasl.upAddr, resp)
	c.clampVersions(resp)
	out := wire.AppendResponse(make([]byte, 0, len(buf.B)), r.hdr.Correlation, false, resp.AppendTo)
	wire.Put(buf)
	return &wire.Buf{B: out}, nil
}

// clampVersions limits the upstream's versions to what the proxy can
// parse and forward, and to --api-version-cap, and lists the client SASL
// the proxy answers.
func (c *conn) clampVersions(resp *kmsg.ApiVersionsResponse) {
	rewrite.ClampVersions(resp, c.p.allowKey)
	rewrite.CapVersions(resp, c.cfg.APIVersionCap)
	if c.p.versions != nil {
		for i := range resp.ApiKeys {
			k := &resp.ApiKeys[i]
			if max, _ := c.p.versions(k.ApiKey); k.MaxVersion > max {
				k.MaxVersion = max
			}
		}
	}
	c.p.advertiseClientSASL(resp)
}

// allowKey hides keys the upstream is not known to serve when the proxy is
// limited by WithVersions.
func (p *Proxy) allowKey(key int16) bool {
	if p.versions == nil {
		return true
	}
	_, ok := p.versions(key)
	return ok
}

// produceError returns the first error in a Produce response, for acks=0
// requests the proxy forwarded with acks=1.
func produceError(frame []byte, h wire.RequestHeader) error {
	off, err := wire.ResponseBody(frame, h.ResponseFlexible())
	if err != nil {
		return err
	}
	resp := kmsg.NewPtrProduceResponse()
	resp.Version = h.Version
	if err := resp.ReadFrom(frame[off:]); err != nil {
		return fmt.Errorf("produce response: %w", err)
	}
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
				return fmt.Errorf("topic %q partition %d: %w", t.Topic, p.Partition, err)
			}
		}
	}
	return nil
}
