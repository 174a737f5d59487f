package clientsasl

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/inorder-proxy/inorder/config"
	"github.com/inorder-proxy/inorder/internal/proxyerr"
	"github.com/inorder-proxy/inorder/wire"
)

func TestRefuse(t *testing.T) {
	out := Refuse(wire.RequestHeader{Key: KeySaslHandshake, Version: 1, Correlation: 7})
	if got := int32(binary.BigEndian.Uint32(out[4:])); got != 7 {
		t.Fatalf("correlation id %d", got)
	}
	hs := kmsg.NewPtrSASLHandshakeResponse()
	hs.Version = 1
	if err := hs.ReadFrom(out[8:]); err != nil || hs.ErrorCode != kerr.UnsupportedSaslMechanism.Code || len(hs.SupportedMechanisms) != 0 {
		t.Fatalf("handshake refused with %+v, %v", hs, err)
	}

	// SaslAuthenticate v2 is flexible: its response header has tags.
	out = Refuse(wire.RequestHeader{Key: KeySaslAuthenticate, Version: 2, Correlation: 8})
	if out[8] != 0 {
		t.Fatalf("no empty tag section in a flexible header: % x", out[:9])
	}
	au := kmsg.NewPtrSASLAuthenticateResponse()
	au.Version = 2
	if err := au.ReadFrom(out[9:]); err != nil || au.ErrorCode != kerr.SaslAuthenticationFailed.Code || au.ErrorMessage == nil || !strings.Contains(*au.ErrorMessage, "upstream-sasl-mechanism") {
		t.Fatalf("authenticate refused with %+v, %v", au, err)
	}
}

func TestHandshakeV0AndItsAnswer(t *testing.T) {
	req := kmsg.NewPtrSASLHandshakeRequest()
	req.Mechanism = config.MechanismScramSHA256
	mech, err := HandshakeV0(req.AppendTo(nil))
	if err != nil || mech != config.MechanismScramSHA256 {
		t.Fatalf("mechanism %q, %v", mech, err)
	}
	if _, err := HandshakeV0([]byte{0, 9}); err == nil {
		t.Fatal("a truncated handshake read")
	}
	answer := func(code int16) []byte {
		resp := kmsg.NewPtrSASLHandshakeResponse()
		resp.ErrorCode = code
		return wire.AppendResponse(nil, 1, false, resp.AppendTo)
	}
	if accepted, ok := Accepted(answer(0)); !accepted || !ok {
		t.Fatalf("accepted %v, %v", accepted, ok)
	}
	if accepted, ok := Accepted(answer(kerr.UnsupportedSaslMechanism.Code)); accepted || !ok {
		t.Fatalf("refused read as %v, %v", accepted, ok)
	}
	if _, ok := Accepted(make([]byte, 9)); ok {
		t.Fatal("a frame too short read")
	}
}

func token(b string) []byte {
	return append(binary.BigEndian.AppendUint32(nil, uint32(len(b))), b...)
}

// fakeClient hands out its tokens in turn and keeps what is written.
type fakeClient struct {
	tokens  [][]byte
	written bytes.Buffer
}

func (c *fakeClient) Token() ([]byte, error) {
	if len(c.tokens) == 0 {
		return nil, io.EOF
	}
	t := c.tokens[0]
	c.tokens = c.tokens[1:]
	return t, nil
}

func (c *fakeClient) Write(b []byte) error { c.written.Write(b); return nil }

// upstream answers each token it reads with the next of answers, then
// closes; received waits for that and returns the tokens it read.
func upstream(t *testing.T, answers ...string) (up net.Conn, received func() []byte) {
	t.Helper()
	proxySide, upSide := net.Pipe()
	var got bytes.Buffer
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer upSide.Close()
		for _, a := range answers {
			tok, err := ReadToken(upSide)
			if err != nil {
				return
			}
			got.Write(tok)
			if _, err := upSide.Write(token(a)); err != nil {
				return
			}
		}
	}()
	t.Cleanup(func() { proxySide.Close(); <-done })
	return proxySide, func() []byte { <-done; return got.Bytes() }
}

func TestRelayRounds(t *testing.T) {
	for _, c := range []struct {
		mech    string
		client  []string
		answers []string
	}{
		{config.MechanismPlain, []string{"\x00u\x00p"}, []string{""}},
		{config.MechanismScramSHA512, []string{"first", "final"}, []string{"server-first", "server-final"}},
		{config.MechanismOAuthBearer, []string{"bearer"}, []string{""}},
		// An error answer: the client acknowledges it with one more token.
		{config.MechanismOAuthBearer, []string{"bearer", "\x01"}, []string{`{"status":"invalid_token"}`, ""}},
	} {
		up, received := upstream(t, c.answers...)
		client := &fakeClient{}
		var wantUp, wantClient []byte
		for i := range c.client {
			client.tokens = append(client.tokens, token(c.client[i]))
			wantUp = append(wantUp, token(c.client[i])...)
			wantClient = append(wantClient, token(c.answers[i])...)
		}
		if err := Relay(c.mech, client, up, 10*time.Second); err != nil {
			t.Fatalf("%s: %v", c.mech, err)
		}
		if got := received(); !bytes.Equal(got, wantUp) {
			t.Errorf("%s: upstream got %q, want %q", c.mech, got, wantUp)
		}
		if len(client.tokens) != 0 {
			t.Errorf("%s: %d client tokens left unread", c.mech, len(client.tokens))
		}
		if !bytes.Equal(client.written.Bytes(), wantClient) {
			t.Errorf("%s: client got %q, want %q", c.mech, client.written.Bytes(), wantClient)
		}
	}
}

func TestRelayRefusals(t *testing.T) {
	if err := Relay("GSSAPI", &fakeClient{}, nil, time.Second); !errors.Is(err, ErrNotRelayed) || !strings.HasPrefix(err.Error(), "client SASL not relayed: GSSAPI after SaslHandshake v0") {
		t.Fatalf("unknown mechanism: %v", err)
	}
	// A broker refusing the credentials closes the connection.
	up, _ := upstream(t)
	client := &fakeClient{tokens: [][]byte{token("\x00u\x00wrong")}}
	err := Relay(config.MechanismPlain, client, up, 10*time.Second)
	if !errors.Is(err, proxyerr.UpstreamFailed) {
		t.Fatalf("upstream closed: %v", err)
	}
	// The client's error is returned as it is.
	up, _ = upstream(t, "")
	if err := Relay(config.MechanismPlain, &fakeClient{}, up, 10*time.Second); err != io.EOF {
		t.Fatalf("client error: %v", err)
	}
}

func TestRelayUpstreamSilent(t *testing.T) {
	proxySide, upSide := net.Pipe()
	defer proxySide.Close()
	defer upSide.Close()
	go io.Copy(io.Discard, upSide)
	client := &fakeClient{tokens: [][]byte{token("\x00u\x00p")}}
	start := time.Now()
	err := Relay(config.MechanismPlain, client, proxySide, 50*time.Millisecond)
	if !errors.Is(err, proxyerr.UpstreamFailed) || !strings.Contains(err.Error(), "timeout") {
		t.Fatalf("silent upstream: %v", err)
	}
	if waited := time.Since(start); waited > 5*time.Second {
		t.Fatalf("waited %v for a silent upstream", waited)
	}
}

func TestReadTokenBound(t *testing.T) {
	tok, err := ReadToken(bytes.NewReader(token("abc")))
	if err != nil || string(tok) != string(token("abc")) {
		t.Fatalf("token %q, %v", tok, err)
	}
	big := binary.BigEndian.AppendUint32(nil, MaxToken+1)
	if _, err := ReadToken(bytes.NewReader(big)); !errors.Is(err, wire.ErrFrameTooLarge) {
		t.Fatalf("a token above MaxToken: %v", err)
	}
	if _, err := ReadToken(bytes.NewReader(token("abc")[:5])); err == nil {
		t.Fatal("a truncated token read")
	}
}
