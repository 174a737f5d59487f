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
	oauth *authn.OAuthBearer // nil without OAUTHBEARER; refreshes its keys until closed
	log   *slog.Logger
	mu    sync.Mutex // one load at a time, so that the last file read wins
}

// newClientAuth builds what cfg asks for; nil when it authenticates no
// client and names none by its certificate. The credential file and the
// OAUTHBEARER keys must read: a proxy told to check clients against what
// it cannot read would refuse every one of them.
func newClientAuth(cfg config.Config, m *metrics.Metrics, log *slog.Logger) (_ *clientAuth, err error) {
	if !cfg.ClientSASL() && cfg.TLSClientCA == "" {
		return nil, nil
	}
	a := &clientAuth{path: cfg.ClientCredentials, log: log}
	defer func() {
		if err != nil {
			a.close()
		}
	}()
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
		case config.MechanismOAuthBearer:
			a.oauth, err = authn.NewOAuthBearer(authn.OAuthConfig{
				JWKS: cfg.ClientOAuthJWKS, Issuer: cfg.ClientOAuthIssuer, Audience: cfg.ClientOAuthAudience,
				PrincipalClaim: cfg.ClientOAuthPrincipalClaim, Logger: log,
			})
			if err != nil {
				return nil, fmt.Errorf("--client-oauth-jwks: %w", err)
			}
			mechs = append(mechs, a.oauth)
			if !cfg.ListenerTLS() {
				log.Warn("OAUTHBEARER tokens cross the network in the clear: the listeners have no --tls-cert")
			}
		default:
			return nil, fmt.Errorf("--client-sasl-mechanisms: %s is not available", name)
		}
	}
	gc := clientauth.Config{Mechanisms: mechs, MaxSessionLifetime: cfg.ClientSessionLifetime, Metrics: m}
	if cfg.TLSClientCA != "" && !cfg.ClientSASL() {
		rules := cfg.TLSPrincipalMappingRules
		if rules == "" {
			rules = authn.DefaultPrincipalMappingRules
		}
		mapper, err := authn.ParsePrincipalMappingRules(rules)
		if err != nil {
			return nil, fmt.Errorf("--tls-principal-mapping-rules: %w", err)
		}
		gc.CertPrincipal = mapper.Principal
		log.Info("naming clients by their certificates", "tls_principal_mapping_rules", mapper.String())
	}
	a.gate = clientauth.New(gc)
	if cfg.ClientSASL() {
		log.Info("authenticating clients", "mechanisms", cfg.ClientSASLMechanisms, "credentials", a.path,
			"session_lifetime", cfg.ClientSessionLifetime, "plain_without_tls", cfg.ClientSASLPlainWithoutTLS)
	}
	return a, nil
}

// close stops what runs in the background (the refresh of a JWKS URL).
func (a *clientAuth) close() {
	if a != nil && a.oauth != nil {
		a.oauth.Close()
	}
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
	return watchReload(ctx, a.path, "client credentials", a.reload, a.log)
}
