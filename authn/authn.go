// Package authn establishes who a client is: SASL exchanges the proxy
// terminates itself (SCRAM-SHA-256, SCRAM-SHA-512, PLAIN, OAUTHBEARER)
// and the principal a client certificate maps to. It holds no sockets: the
// proxy feeds it the bytes of SaslAuthenticate requests (or raw v0 tokens)
// and writes back what it answers, so every rule here is tested without a
// connection.
package authn

import (
	"errors"
	"time"
)

// Principal is who a client authenticated as, in Kafka's form
// "Type:Name" (User:alice). The zero value is the anonymous principal
// Kafka gives an unauthenticated client: User:ANONYMOUS.
type Principal struct {
	Type string
	Name string
}

// Anonymous is the principal of a client that did not authenticate.
var Anonymous = Principal{Type: "User", Name: "ANONYMOUS"}

// String gives the principal as Kafka writes it, "User:alice".
func (p Principal) String() string {
	if p.Type == "" && p.Name == "" {
		return Anonymous.String()
	}
	t := p.Type
	if t == "" {
		t = "User"
	}
	return t + ":" + p.Name
}

// ErrAuthentication is wrapped by every refusal of a client's credentials.
// Its message is safe to send to the client and to log: it never holds a
// secret, and it does not tell an unknown user from a wrong password.
var ErrAuthentication = errors.New("authentication failed: invalid credentials")

// FailureDelay is how long the proxy holds a connection whose
// authentication it refused before closing it: the default of Kafka's
// connection.failed.authentication.delay.ms (KIP-306), which slows a
// client guessing passwords and never delays a good one.
const FailureDelay = 100 * time.Millisecond

// Exchange is one SASL authentication in progress, server side. Step takes
// the client's next token and returns the server's reply; done reports that
// the exchange ended with success. An error ends the exchange; it wraps
// ErrAuthentication when the credentials were refused, and the reply, if
// not nil, is still to be sent (a SCRAM server-error, say).
type Exchange interface {
	Step(token []byte) (reply []byte, done bool, err error)
	// Principal is who authenticated; valid once Step reported done.
	Principal() Principal
	// Lifetime bounds the session (KIP-368): zero means none of its own,
	// a token's expiry otherwise. The proxy takes the smaller of it and
	// its configured maximum.
	Lifetime() time.Duration
}

// Claimant is an Exchange that can tell whom the client named as itself,
// proven or not, so that a refused authentication is recorded with the
// identity it claimed. ok is false when the client named no one the
// mechanism could read. What it gives is the client's word alone until
// Step reports done: never an identity to act on.
type Claimant interface {
	Claimed() (p Principal, ok bool)
}

// Mechanism starts exchanges of one SASL mechanism.
type Mechanism interface {
	// Name is the mechanism's name as SaslHandshake carries it
	// ("SCRAM-SHA-256").
	Name() string
	// Start begins one exchange. tls reports whether the client connection
	// is encrypted, for mechanisms that send secrets in the clear.
	Start(tls bool) Exchange
}
