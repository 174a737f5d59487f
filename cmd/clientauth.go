package cmd

import (
	"context"
	"fmt"
	"log/slog"
	"sync"

	"github.com/inorder-proxy/inorder/authn"
	"github.com/inorder-proxy/inorder/clientauth"
	"github.com/inorder-proxy/inorder/config"
	"github.com/inorder-proxy/inorder/metrics"
	"github.com/inorder-proxy/inorder/proxy"
)

// clientAuth is the client authentication a command runs: the gate the
// proxy calls and the credential file behind it, re-read when it changes
// and on every reload (SIGHUP, a changed --config). A nil *clientAuth is
// none.
type clientAuth struct {
	gate  *clientauth.Gate
	store *authn.Store // nil without SCRAM or PLAIN
	path  string
	log   *slog.Logger
	mu    sync.Mutex // one load at a time, so that the last file read wins
}

// newClientAuth builds what cfg asks for; nil when it authenticates no
// client. The credential file must read: a proxy told to check clients
// against a file it cannot read would refuse every one of them.
func newClientAuth(cfg config.Config, m *metrics.Metrics, log *slog.Logger) (*clientAuth, error) {
	if !cfg.ClientSASL() {
		return nil, nil
	}
	a := &clientAuth{path: cfg.ClientCredentials, log: log}
	if a.path != "" {
		creds, err := authn.ReadCredentials(a.path)
		if err != nil {
			return nil, fmt.Errorf("--client-credentials: %w", err)
		}
		a.store = authn.NewStore(creds)
	}
	var mechs []authn.Mechanism
	for _, name := range cfg.ClientSASLMechanisms {
		switch name {
		case config.MechanismScramSHA256, config.MechanismScramSHA512:
			mech, err := authn.NewSCRAM(name, a.store)
			if err != nil {
				return nil, err
			}
			mechs = append(mechs, mech)
		case config.MechanismPlain:
			mechs = append(mechs, authn.NewPlain(a.store, authn.PlainOptions{AllowWithoutTLS: cfg.ClientSASLPlainWithoutTLS}))
		default:
			return nil, fmt.Errorf("--client-sasl-mechanisms: %s is not available", name)
		}
	}
	a.gate = clientauth.New(clientauth.Config{Mechanisms: mechs, MaxSessionLifetime: cfg.ClientSessionLifetime, Metrics: m})
	log.Info("authenticating clients", "mechanisms", cfg.ClientSASLMechanisms, "credentials", a.path,
		"session_lifetime", cfg.ClientSessionLifetime, "plain_without_tls", cfg.ClientSASLPlainWithoutTLS)
	return a, nil
}

// options gives the proxy the gate.
func (a *clientAuth) options() []proxy.Option {
	if a == nil {
		return nil
	}
	return []proxy.Option{proxy.WithClientAuth(a.gate)}
}

// hooks run on every configuration reload.
func (a *clientAuth) hooks() []func() error {
	if a == nil || a.store == nil {
		return nil
	}
	return []func() error{a.reload}
}

// reload re-reads the credential file. On an error the users already
// loaded are kept: a file caught half-edited locks nobody out.
func (a *clientAuth) reload() error {
	a.mu.Lock()
	defer a.mu.Unlock()
	creds, err := authn.ReadCredentials(a.path)
	if err != nil {
		return fmt.Errorf("--client-credentials: keeping the users loaded before: %w", err)
	}
	a.store.Swap(creds)
	a.log.Info("client credentials loaded", "file", a.path, "users", len(creds.Users()))
	return nil
}

// watch re-reads the credential file whenever its directory changes,
// until ctx ends; the returned function waits for that. A file that
// cannot be watched is logged: SIGHUP still re-reads it.
func (a *clientAuth) watch(ctx context.Context) (stop func()) {
	if a == nil || a.store == nil {
		return func() {}
	}
	changed, stopWatch, err := watchFile(a.path, a.log)
	if err != nil {
		a.log.Warn("client credentials not watched; re-read them with SIGHUP", "file", a.path, "err", err)
		return func() {}
	}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-ctx.Done():
				return
			case <-changed:
				if err := a.reload(); err != nil {
					a.log.Warn("client credentials not reloaded", "err", err)
				}
			}
		}
	}()
	return func() {
		cancel()
		<-done
		stopWatch()
	}
}
