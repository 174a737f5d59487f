package cmd

import (
	"context"
	"fmt"
	"log/slog"
	"sync"

	"github.com/inorder-proxy/inorder/acl"
	"github.com/inorder-proxy/inorder/authz"
	"github.com/inorder-proxy/inorder/config"
	"github.com/inorder-proxy/inorder/metrics"
	"github.com/inorder-proxy/inorder/proxy"
)

// aclGuard is the authorization a command runs: the ACL file's rules,
// re-read when the file changes and on every reload (SIGHUP, a changed
// --config). A nil *aclGuard checks nothing.
type aclGuard struct {
	g   *authz.Guard
	log *slog.Logger
	mu  sync.Mutex // one load at a time, so that the last file read wins
}

// newACLGuard builds what cfg asks for; nil without --acl-file. The file
// must read: a proxy told to enforce rules it cannot read would refuse
// everything or nothing, and neither is what was asked.
func newACLGuard(cfg config.Config, m *metrics.Metrics, log *slog.Logger) (*aclGuard, error) {
	if cfg.ACLFile == "" {
		return nil, nil
	}
	var counter authz.Counter
	if m != nil {
		counter = m
	}
	g, err := authz.New(cfg.ACLFile, acl.Options{SuperUsers: cfg.SuperUsers}, counter, log)
	if err != nil {
		return nil, fmt.Errorf("--acl-file: %w", err)
	}
	log.Info("enforcing ACLs", "file", cfg.ACLFile, "bindings", g.Authorizer().Set().Len(), "super_users", cfg.SuperUsers)
	return &aclGuard{g: g, log: log}, nil
}

// options gives the proxy the guard.
func (a *aclGuard) options() []proxy.Option {
	if a == nil {
		return nil
	}
	return []proxy.Option{proxy.WithAuthorization(a.g)}
}

// hooks run on every configuration reload.
func (a *aclGuard) hooks() []func() error {
	if a == nil {
		return nil
	}
	return []func() error{a.reload}
}

// reload re-reads the ACL file. On an error the rules already loaded are
// kept: a file caught half-edited neither opens nor closes anything.
func (a *aclGuard) reload() error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if err := a.g.Reload(); err != nil {
		return fmt.Errorf("--acl-file: keeping the ACLs loaded before: %w", err)
	}
	a.log.Info("ACLs loaded", "file", a.g.File(), "bindings", a.g.Authorizer().Set().Len())
	return nil
}

// watch re-reads the ACL file whenever its directory changes, until ctx
// ends; the returned function waits for that. A file that cannot be
// watched is logged: SIGHUP still re-reads it.
func (a *aclGuard) watch(ctx context.Context) (stop func()) {
	if a == nil {
		return func() {}
	}
	return watchReload(ctx, a.g.File(), "ACLs", a.reload, a.log)
}
