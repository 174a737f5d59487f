package upauth

// What the upstream answers before anyone authenticates. ApiVersions is
// the one request a Kafka SASL listener answers before authentication, so
// the proxy asks it in its own name at discovery, to tell an upstream that
// is down from one that lists its brokers only to authenticated clients,
// and keeps the answers, to answer a client's ApiVersions before that
// client has authenticated and its upstream connection is dialled.

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"sync"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/inorder-proxy/inorder/internal/proxyerr"
)

// Versions are the ApiVersions answers of the upstream, per address, and
// the last one of any, for answers given before a client's upstream
// connection is dialled. An address is one the configuration or the
// upstream's metadata names, so the map is bounded by the node table. The
// zero value knows no answer.
type Versions struct {
	mu     sync.Mutex
	byAddr map[string]*kmsg.ApiVersionsResponse
	last   *kmsg.ApiVersionsResponse
	// probe keeps asking the upstream to one probe at a time.
	probe sync.Mutex
}

// learn records resp, an answer from addr, unless it is in error or of a
// lower version than the one held (a lower version carries fewer fields).
// resp is kept: the caller must not change it after.
func (v *Versions) learn(addr string, resp *kmsg.ApiVersionsResponse) {
	if resp.ErrorCode != 0 || len(resp.ApiKeys) == 0 {
		return
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.byAddr == nil {
		v.byAddr = make(map[string]*kmsg.ApiVersionsResponse)
	}
	if old := v.byAddr[addr]; old == nil || old.Version <= resp.Version {
		v.byAddr[addr] = resp
	}
	if v.last == nil || v.last.Version <= resp.Version {
		v.last = resp
	}
}

// Keep records a copy of resp, an ApiVersions answer of the upstream at
// addr (the proxy's own or a client's), unless it refuses the version
// asked; the caller may then change resp, as it clamps it for a client.
func (v *Versions) Keep(addr string, resp *kmsg.ApiVersionsResponse) {
	if resp.ErrorCode == kerr.UnsupportedVersion.Code {
		return
	}
	kept := *resp
	kept.ApiKeys = slices.Clone(resp.ApiKeys)
	v.learn(addr, &kept)
}

// Get returns the answer of addr, or of any address; nil when none is
// known. It must not be changed.
func (v *Versions) Get(addr string) *kmsg.ApiVersionsResponse {
	v.mu.Lock()
	defer v.mu.Unlock()
	if r := v.byAddr[addr]; r != nil {
		return r
	}
	return v.last
}

// learnVersionsAt is the ApiVersions version the proxy asks the upstream
// for its versions: v3 and later carry the features clients read.
const learnVersionsAt = 3

// Probe sends one ApiVersions request of a version to addr, in the
// proxy's own name, and returns the answer.
type Probe func(ctx context.Context, addr string, version int16) (*kmsg.ApiVersionsResponse, error)

// Learn asks addr, or upstreams in turn when addr is empty or fails, for
// its API versions with probe. One probe runs at a time; a probe that
// finds the versions learned meanwhile asks nothing.
func (v *Versions) Learn(ctx context.Context, addr string, upstreams []string, probe Probe) error {
	v.probe.Lock()
	defer v.probe.Unlock()
	if v.Get(addr) != nil {
		return nil
	}
	addrs := upstreams
	if addr != "" {
		addrs = append([]string{addr}, addrs...)
	}
	var errs []error
	for _, a := range addrs {
		resp, err := probe(ctx, a, learnVersionsAt)
		if err == nil && resp.ErrorCode != 0 {
			resp, err = probe(ctx, a, 0)
		}
		if err == nil {
			v.learn(a, resp)
			return nil
		}
		errs = append(errs, err)
	}
	return proxyerr.OneLine(errs...)
}

// Unauthenticated asks upstreams in turn, with probe, for ApiVersions v0,
// after a discovery that failed while the proxy holds no credentials of
// its own. ApiVersions is the one request a Kafka SASL listener answers
// before authentication, so an upstream that answers it (nil) is alive and
// only withholds its metadata.
func Unauthenticated(ctx context.Context, upstreams []string, probe Probe) error {
	var errs []error
	for _, addr := range upstreams {
		_, err := probe(ctx, addr, 0)
		if err == nil {
			return nil
		}
		errs = append(errs, err)
	}
	return proxyerr.OneLine(errs...)
}

// AskVersions sends one ApiVersions request of version on nc, a new
// connection to addr that carries nothing else, and returns the answer;
// an upstream that does not know the version answers with its v0 body.
// nc's deadline bounds it. Its errors for an answer that cannot be read
// wrap proxyerr.UpstreamProtocol.
func AskVersions(nc net.Conn, addr string, version int16) (*kmsg.ApiVersionsResponse, error) {
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
		return nil, fmt.Errorf("%w: api versions from %s: frame of %d bytes", proxyerr.UpstreamProtocol, addr, size)
	}
	if got := int32(binary.BigEndian.Uint32(head[4:])); got != corr {
		return nil, fmt.Errorf("%w: api versions from %s: correlation id %d", proxyerr.UpstreamProtocol, addr, got)
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
		return nil, fmt.Errorf("%w: api versions from %s: %v", proxyerr.UpstreamProtocol, addr, err)
	}
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil && !errors.Is(err, kerr.UnsupportedVersion) {
		return nil, fmt.Errorf("api versions from %s: %w", addr, err)
	}
	return resp, nil
}
