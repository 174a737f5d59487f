package upauth

// Who a client connection reaches the upstream as, when the proxy
// authenticates its clients: the credentials mapped to the client's
// principal (--upstream-principal-credentials), else the proxy's own
// (--upstream-sasl-mechanism), else, with no mapping configured, none.

import (
	"context"
	"errors"
)

// Identities maps a principal to the credentials it reaches the upstream
// with; Principals is the implementation.
type Identities interface {
	// For returns principal's credentials, nil when it has none.
	For(principal string) *Authenticator
}

// ErrNoIdentity refuses a principal with no upstream credentials.
var ErrNoIdentity = errors.New("no upstream credentials for this principal")

// As returns who principal reaches the upstream as (nil: no SASL), given
// the mapping ids (nil: none configured) and the proxy's own credentials
// own (nil: none), or ErrNoIdentity. A principal the mapping leaves out
// while the proxy has no credentials of its own is refused: reaching the
// cluster in no one's name is not what a mapping asks for.
func As(ids Identities, own *Authenticator, principal string) (*Authenticator, error) {
	if ids == nil {
		return own, nil
	}
	if a := ids.For(principal); a != nil {
		return a, nil
	}
	if own != nil {
		return own, nil
	}
	return nil, ErrNoIdentity
}

type identityKey struct{}

// WithIdentity makes the dials under ctx authenticate as a; nil leaves
// the proxy's own identity.
func WithIdentity(ctx context.Context, a *Authenticator) context.Context {
	if a == nil {
		return ctx
	}
	return context.WithValue(ctx, identityKey{}, a)
}

// Identity is who a dial under ctx authenticates as: the identity ctx
// carries (WithIdentity), or own (nil: none).
func Identity(ctx context.Context, own *Authenticator) *Authenticator {
	if a, ok := ctx.Value(identityKey{}).(*Authenticator); ok {
		return a
	}
	return own
}
