package proxy

import (
	"context"
	"errors"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/inorder-proxy/inorder/upauth"
)

// ErrUpstreamNeedsCredentials is returned by Discover when the upstream
// answers but will not list its brokers to a caller that has not
// authenticated, as a SASL listener does, and the proxy holds no
// credentials of its own: clients bring theirs (SASL pass-through). The
// upstream counts as answering; node listeners open when the metadata a
// client receives first names them.
var ErrUpstreamNeedsCredentials = errors.New("the upstream lists its brokers only to authenticated clients, and SASL passes through")

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
	return upauth.AskVersions(nc, addr, version)
}
