// Package clientsasl holds a client's SASL when the proxy does not answer
// it itself (that is package clientauth): passed through to the upstream,
// or refused while the proxy authenticates upstream in its own name.
//
// Passed through, a SaslHandshake and SaslAuthenticate are requests like
// any other, forwarded in order; the legacy flow is the exception: after a
// SaslHandshake v0 the upstream accepts, the next frames in both
// directions are raw length-prefixed SASL tokens with no Kafka header.
// This package reads that handshake and its answer, and relays the
// mechanism's rounds token by token (Relay). The raw token reader is
// clientauth's too, for the same flow answered at the proxy.
//
// No socket of its own and no lock: the proxy gives Relay the client's
// side and the upstream connection once nothing else is in flight.
package clientsasl

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/inorder-proxy/inorder/config"
	"github.com/inorder-proxy/inorder/internal/proxyerr"
	"github.com/inorder-proxy/inorder/wire"
)

// API keys of a client's SASL.
const (
	KeySaslHandshake    = 17
	KeySaslAuthenticate = 36
)

// MaxToken bounds a raw SASL token, as Kafka's
// sasl.server.max.receive.size does.
const MaxToken = 512 << 10

// ErrNotRelayed closes a client whose SASL exchange the proxy cannot
// relay.
var ErrNotRelayed = errors.New("client SASL not relayed")

// refusal is the message of a SaslAuthenticate refused while the proxy
// authenticates upstream itself.
const refusal = "this inorder proxy authenticates to the upstream itself (upstream-sasl-mechanism); connect without SASL"

// Refuse returns the whole response frame that answers a client's
// SaslHandshake or SaslAuthenticate, of header h, with an error that says
// the proxy authenticates for the client: a handshake lists no mechanism,
// an authenticate fails with a message.
func Refuse(h wire.RequestHeader) []byte {
	if h.Key == KeySaslHandshake {
		resp := kmsg.NewSASLHandshakeResponse()
		resp.Version = h.Version
		resp.ErrorCode = kerr.UnsupportedSaslMechanism.Code
		resp.SupportedMechanisms = []string{}
		return wire.AppendResponse(nil, h.Correlation, false, resp.AppendTo)
	}
	resp := kmsg.NewSASLAuthenticateResponse()
	resp.Version = h.Version
	resp.ErrorCode = kerr.SaslAuthenticationFailed.Code
	m := refusal
	resp.ErrorMessage = &m
	return wire.AppendResponse(nil, h.Correlation, h.ResponseFlexible(), resp.AppendTo)
}

// HandshakeV0 returns the mechanism of a SaslHandshake v0 request whose
// body is body; its raw tokens follow its answer if the upstream accepts
// it.
func HandshakeV0(body []byte) (string, error) {
	req := kmsg.NewPtrSASLHandshakeRequest()
	req.Version = 0
	if err := req.ReadFrom(body); err != nil {
		return "", err
	}
	return req.Mechanism, nil
}

// Accepted reports whether frame, the upstream's answer to a SaslHandshake
// v0, accepts it. Its response header is v0 and its body starts with the
// error code; ok is false for a frame too short to say.
func Accepted(frame []byte) (accepted, ok bool) {
	if len(frame) < 10 {
		return false, false
	}
	return binary.BigEndian.Uint16(frame[8:]) == 0, true
}

// rounds is how many client token, server token rounds a mechanism takes
// in the legacy flow: the proxy must know where the tokens end.
func rounds(mech string) int {
	switch mech {
	case config.MechanismPlain, config.MechanismOAuthBearer:
		return 1
	case config.MechanismScramSHA256, config.MechanismScramSHA512:
		return 2
	}
	return 0
}

// Client is the client's side of a relay. Its errors are returned as
// they are, so they say what the proxy closes the connection with.
type Client interface {
	// Token reads the client's next raw token, with its length prefix,
	// under the read timeout of a request.
	Token() ([]byte, error)
	// Write writes b to the client.
	Write(b []byte) error
}

// Relay copies the legacy flow's tokens of mech between client and up,
// client first, each round one token each way; the upstream's each
// within timeout. Nothing else may use either connection meanwhile. A
// broker that refuses the credentials closes the connection, which ends
// the client's too: the error then wraps proxyerr.UpstreamFailed.
func Relay(mech string, client Client, up net.Conn, timeout time.Duration) error {
	n := rounds(mech)
	if n == 0 {
		return fmt.Errorf("%w: %s after SaslHandshake v0; only PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 and OAUTHBEARER are relayed there (SaslHandshake v1 relays every mechanism)", ErrNotRelayed, mech)
	}
	for i := 0; i < n; i++ {
		tok, err := client.Token()
		if err != nil {
			return err
		}
		if _, err := up.Write(tok); err != nil {
			return fmt.Errorf("%w: write: %v", proxyerr.UpstreamFailed, err)
		}
		// The upstream's answer is bounded too: while the proxy waits
		// for it, nothing reads the client, so a client that gives up
		// would go unnoticed behind an upstream that never answers.
		up.SetReadDeadline(time.Now().Add(timeout))
		resp, err := ReadToken(up)
		up.SetReadDeadline(time.Time{})
		if err != nil {
			return fmt.Errorf("%w: SASL token (a broker refusing the credentials closes the connection): %v", proxyerr.UpstreamFailed, err)
		}
		if err := client.Write(resp); err != nil {
			return err
		}
		if mech == config.MechanismOAuthBearer && i == 0 && len(resp) > 4 {
			// A non-empty answer is the server's error (RFC 7628
			// 3.2.2); the client acknowledges it with one more token.
			n = 2
		}
	}
	return nil
}

// ReadToken reads one length-prefixed raw SASL token of at most MaxToken
// bytes and returns it with its prefix, ready to forward.
func ReadToken(r io.Reader) ([]byte, error) {
	var lenBuf [4]byte
	n, err := wire.ReadLength(r, &lenBuf, 0, MaxToken)
	if err != nil {
		return nil, err
	}
	tok := make([]byte, 4+int(n))
	copy(tok, lenBuf[:])
	if err := wire.ReadBody(r, tok[4:]); err != nil {
		return nil, err
	}
	return tok, nil
}
