package upauth

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// maxAuthResponse bounds an upstream's answer during authentication; SASL
// tokens are small, and nothing else may arrive before the exchange ends.
const maxAuthResponse = 1 << 20

// Authenticate runs the SASL exchange on nc, which must carry nothing
// else until it returns: right after the dial, or with no request in flight
// for a re-authentication (KIP-368). host is the upstream's host, for
// mechanisms that bind to it. ctx bounds the exchange.
//
// A refusal (an error in the upstream's answer) wraps ErrRefused and
// names the mechanism and user; an unreadable secret wraps ErrNoSecret;
// anything else, a connection closed or reset during the exchange
// included, is the connection's failure: no answer refused anything.
func (a *Authenticator) Authenticate(ctx context.Context, nc net.Conn, host string) (Session, error) {
	// Blocking I/O is cancelled by a deadline in the past; if that
	// happened, the connection is unusable whatever the exchange says.
	stop := context.AfterFunc(ctx, func() { nc.SetDeadline(time.Now()) })
	start := time.Now()
	lifetimeMs, err := a.exchange(ctx, &authConn{nc: nc}, host)
	if !stop() {
		if err == nil || !errors.Is(err, ErrRefused) {
			err = fmt.Errorf("authentication cut short: %w", context.Cause(ctx))
		}
	}
	if err != nil {
		return Session{}, err
	}
	return newSession(start, lifetimeMs), nil
}

// refused wraps ErrRefused with who was refused, never the secret.
func (a *Authenticator) refused(format string, args ...any) error {
	who := "mechanism " + a.o.Mechanism
	if a.o.Username != "" {
		who += ", user " + a.o.Username
	}
	return fmt.Errorf("%w (%s): %s", ErrRefused, who, fmt.Sprintf(format, args...))
}

// failed is the error of a request of the exchange that got no answer.
// A connection closed or reset there is the connection's failure, not a
// refusal, but brokers that refuse by closing (kfake, some
// Kafka-compatible brokers) look the same, so it becomes a *ClosedError
// that says what to check.
func (a *Authenticator) failed(step string, err error) error {
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE) {
		return &ClosedError{Mechanism: a.o.Mechanism, User: a.o.Username, Step: step, Err: err, Source: a.o.Source}
	}
	return fmt.Errorf("%s: %w", step, err)
}

func (a *Authenticator) exchange(ctx context.Context, c *authConn, host string) (int64, error) {
	hs := kmsg.NewPtrSASLHandshakeRequest()
	hs.Version = 1
	hs.Mechanism = a.mech.Name()
	hsResp := kmsg.NewPtrSASLHandshakeResponse()
	if err := c.roundTrip(hs, hsResp); err != nil {
		return 0, a.failed("SaslHandshake", err)
	}
	if err := kerr.ErrorForCode(hsResp.ErrorCode); err != nil {
		return 0, a.refused("SaslHandshake: %v; the upstream offers %v", err, hsResp.SupportedMechanisms)
	}
	session, write, err := a.mech.Authenticate(ctx, host)
	if err != nil {
		return 0, err
	}
	var lifetimeMs int64
	for done := false; !done; {
		req := kmsg.NewPtrSASLAuthenticateRequest()
		req.Version = 1
		req.SASLAuthBytes = write
		resp := kmsg.NewPtrSASLAuthenticateResponse()
		if err := c.roundTrip(req, resp); err != nil {
			// Kafka answers a refusal (SASL_AUTHENTICATION_FAILED)
			// before it closes; a close with no answer is a dropped
			// connection.
			return 0, a.failed("SaslAuthenticate", err)
		}
		if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
			msg := ""
			if resp.ErrorMessage != nil {
				msg = ": " + *resp.ErrorMessage
			}
			return 0, a.refused("%v%s", err, msg)
		}
		lifetimeMs = resp.SessionLifetimeMillis
		// Every SaslAuthenticate has a response (KIP-152), so a final
		// client message is sent as one more round; there is none for
		// the mechanisms offered here.
		if done, write, err = session.Challenge(resp.SASLAuthBytes); err != nil {
			return 0, a.refused("%v", err)
		}
		if done && len(write) > 0 {
			done = false
			session = finished{}
		}
	}
	return lifetimeMs, nil
}

// finished ends a session whose last client message was just answered.
type finished struct{}

func (finished) Challenge([]byte) (bool, []byte, error) { return true, nil, nil }

// authConn issues requests one at a time on a connection and reads their
// responses, which have the v0 response header at the versions used.
type authConn struct {
	nc   net.Conn
	corr int32
	buf  []byte
}

var formatter = kmsg.NewRequestFormatter(kmsg.FormatterClientID("inorder"))

func (c *authConn) roundTrip(req kmsg.Request, resp kmsg.Response) error {
	c.corr++
	c.buf = formatter.AppendRequest(c.buf[:0], req, c.corr)
	if _, err := c.nc.Write(c.buf); err != nil {
		return err
	}
	var lenBuf [4]byte
	if _, err := io.ReadFull(c.nc, lenBuf[:]); err != nil {
		return err
	}
	size := binary.BigEndian.Uint32(lenBuf[:])
	if size < 4 || size > maxAuthResponse {
		return fmt.Errorf("response of %d bytes", size)
	}
	body := make([]byte, size)
	if _, err := io.ReadFull(c.nc, body); err != nil {
		return err
	}
	if corr := int32(binary.BigEndian.Uint32(body)); corr != c.corr {
		return fmt.Errorf("correlation id %d, expected %d", corr, c.corr)
	}
	resp.SetVersion(req.GetVersion())
	return resp.ReadFrom(body[4:])
}
