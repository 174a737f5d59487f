package cmd

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/inorder-proxy/inorder/config"
	"github.com/inorder-proxy/inorder/proxy"
	"github.com/inorder-proxy/inorder/upauth"
)

// upstreamIdentities is the mapping of --upstream-principal-credentials,
// re-read when the file changes and on every reload (SIGHUP, a changed
// --config). A nil *upstreamIdentities maps nobody.
type upstreamIdentities struct {
	m   *upauth.Principals
	log *slog.Logger
}

// newUpstreamIdentities reads the mapping cfg names; nil without one. Every
// entry's secret must read: a principal whose credentials cannot be sent
// would be refused at every connection.
func newUpstreamIdentities(cfg config.Config, log *slog.Logger) (*upstreamIdentities, error) {
	if cfg.UpstreamPrincipalCredentials == "" {
		return nil, nil
	}
	m, err := upauth.LoadPrincipals(cfg.UpstreamPrincipalCredentials, nil)
	if err != nil {
		return nil, fmt.Errorf("--upstream-principal-credentials: %w", err)
	}
	fallback := "refused"
	if cfg.UpstreamSASLMechanism != "" {
		fallback = "the proxy's own identity (" + cfg.UpstreamSASLMechanism + " " + cfg.UpstreamSASLUsername + ")"
	}
	log.Info("clients reach the upstream with the credentials of their principal", "file", m.File(), "principals", m.Len(), "unmapped_principals", fallback)
	return &upstreamIdentities{m: m, log: log}, nil
}

// options gives the proxy the mapping.
func (u *upstreamIdentities) options() []proxy.Option {
	if u == nil {
		return nil
	}
	return []proxy.Option{proxy.WithUpstreamIdentities(u.m)}
}

// hooks run on every configuration reload.
func (u *upstreamIdentities) hooks() []func() error {
	if u == nil {
		return nil
	}
	return []func() error{u.reload}
}

// reload re-reads the file. On an error the mapping read before is kept.
func (u *upstreamIdentities) reload() error {
	if err := u.m.Reload(); err != nil {
		return fmt.Errorf("--upstream-principal-credentials: keeping the mapping loaded before: %w", err)
	}
	u.log.Info("upstream principal credentials loaded", "file", u.m.File(), "principals", u.m.Len())
	return nil
}

// watch re-reads the file whenever its directory changes, until ctx ends;
// the returned function waits for that.
func (u *upstreamIdentities) watch(ctx context.Context) (stop func()) {
	if u == nil {
		return func() {}
	}
	return watchReload(ctx, u.m.File(), "upstream principal credentials", u.reload, u.log)
}
