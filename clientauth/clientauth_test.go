package clientauth

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/inorder-proxy/inorder/authn"
	"github.com/inorder-proxy/inorder/wire"
)

// fakeMech is a one-round mechanism: the token is the user name, "bad"
// refuses, and the exchange's lifetime is life.
type fakeMech struct {
	name string
	life time.Duration
}

func (m *fakeMech) Name() string              { return m.name }
func (m *fakeMech) Start(bool) authn.Exchange { return &fakeExchange{m: m} }

type fakeExchange struct {
	m    *fakeMech
	user string
}

func (x *fakeExchange) Step(tok []byte) ([]byte, bool, error) {
	if string(tok) == "bad" {
		return nil, false, authn.ErrAuthentication
	}
	x.user = string(tok)
	return []byte("ok"), true, nil
}
func (x *fakeExchange) Principal() authn.Principal {
	return authn.Principal{Type: "User", Name: x.user}
}
func (x *fakeExchange) Lifetime() time.Duration { return x.m.life }

// clock is a fake time.
type clock struct{ t time.Time }

func (c *clock) now() time.Time { return c.t }

func testGate(life, maxLife time.Duration) (*Gate, *clock) {
	c := &clock{t: time.Unix(1e9, 0)}
	return New(Config{Mechanisms: []authn.Mechanism{&fakeMech{name: "FAKE", life: life}, &fakeMech{name: "OTHER"}},
		MaxSessionLifetime: maxLife, Now: c.now}), c
}

var corr int32

// request frames req as a client would, and parses its header as the
// proxy does.
func request(t *testing.T, req kmsg.Request) (wire.RequestHeader, []byte) {
	t.Helper()
	corr++
	frame := kmsg.NewRequestFormatter(kmsg.FormatterClientID("t")).AppendRequest(nil, req, corr)
	h, err := wire.ParseRequestHeader(frame)
	if err != nil {
		t.Fatal(err)
	}
	return h, frame
}

func handshake(version int16, mech string) kmsg.Request {
	r := kmsg.NewPtrSASLHandshakeRequest()
	r.Version, r.Mechanism = version, mech
	return r
}

func authenticate(tok string) kmsg.Request {
	r := kmsg.NewPtrSASLAuthenticateRequest()
	r.Version, r.SASLAuthBytes = 2, []byte(tok)
	return r
}

func metadata() kmsg.Request {
	r := kmsg.NewPtrMetadataRequest()
	r.Version = 9
	return r
}

// decode reads a response the gate answered to req, checking its
// correlation id.
func decode(t *testing.T, h wire.RequestHeader, req kmsg.Request, v Verdict) kmsg.Response {
	t.Helper()
	b := v.Response[4:]
	if got := int32(b[0])<<24 | int32(b[1])<<16 | int32(b[2])<<8 | int32(b[3]); got != h.Correlation {
		t.Fatalf("correlation id %d, want %d", got, h.Correlation)
	}
	b = b[4:]
	if h.ResponseFlexible() {
		b = b[1:]
	}
	resp := req.ResponseKind()
	if err := resp.ReadFrom(b); err != nil {
		t.Fatal(err)
	}
	return resp
}

// do hands req to s and returns the verdict and, when answered, the
// response.
func do(t *testing.T, s Session, req kmsg.Request) (Verdict, kmsg.Response) {
	t.Helper()
	h, frame := request(t, req)
	v := s.Request(h, frame)
	if v.Action == Pass || v.Action == Close {
		return v, nil
	}
	return v, decode(t, h, req, v)
}

func login(t *testing.T, s Session, user string) *kmsg.SASLAuthenticateResponse {
	t.Helper()
	if v, r := do(t, s, handshake(1, "FAKE")); v.Action != Answer || r.(*kmsg.SASLHandshakeResponse).ErrorCode != 0 {
		t.Fatalf("handshake: %+v", v)
	}
	v, r := do(t, s, authenticate(user))
	if v.Action != Answer || r.(*kmsg.SASLAuthenticateResponse).ErrorCode != 0 {
		t.Fatalf("authenticate: %+v %+v", v, r)
	}
	return r.(*kmsg.SASLAuthenticateResponse)
}

func TestStatesBeforeAuthentication(t *testing.T) {
	g, _ := testGate(0, 0)
	s := g.Open(nil)
	av := kmsg.NewPtrApiVersionsRequest()
	if v, _ := do(t, s, av); v.Action != Pass {
		t.Fatalf("ApiVersions before authentication: %v, want Pass", v.Action)
	}
	if s.Principal() != "" {
		t.Fatalf("principal %q before authentication", s.Principal())
	}
	if v, _ := do(t, s, metadata()); v.Action != Close || !errors.Is(v.Err, ErrIllegalState) {
		t.Fatalf("Metadata before authentication: %+v", v)
	}

	s = g.Open(nil)
	if v, _ := do(t, s, authenticate("alice")); v.Action != Close || !errors.Is(v.Err, ErrIllegalState) {
		t.Fatalf("SaslAuthenticate before a handshake: %+v", v)
	}

	s = g.Open(nil)
	do(t, s, handshake(1, "FAKE"))
	if v, _ := do(t, s, av); v.Action != Close {
		t.Fatalf("ApiVersions during the exchange: %+v, want Close", v)
	}
}

func TestUnknownMechanism(t *testing.T) {
	g, _ := testGate(0, 0)
	s := g.Open(nil)
	v, r := do(t, s, handshake(1, strings.Repeat("X", 500)))
	hs := r.(*kmsg.SASLHandshakeResponse)
	if v.Action != AnswerThenClose || hs.ErrorCode != kerr.UnsupportedSaslMechanism.Code || strings.Join(hs.SupportedMechanisms, ",") != "FAKE,OTHER" {
		t.Fatalf("unknown mechanism: %+v %+v", v, hs)
	}
	if !errors.Is(v.Err, ErrRefused) || len(v.Err.Error()) > 200 || v.Delay != authn.FailureDelay {
		t.Fatalf("refusal: %v (delay %v)", v.Err, v.Delay)
	}
}

func TestRefusal(t *testing.T) {
	g, _ := testGate(0, 0)
	s := g.Open(nil)
	do(t, s, handshake(1, "FAKE"))
	v, r := do(t, s, authenticate("bad"))
	a := r.(*kmsg.SASLAuthenticateResponse)
	if v.Action != AnswerThenClose || v.Delay != authn.FailureDelay || !errors.Is(v.Err, ErrRefused) || !errors.Is(v.Err, authn.ErrAuthentication) {
		t.Fatalf("refused: %+v", v)
	}
	if a.ErrorCode != kerr.SaslAuthenticationFailed.Code || a.ErrorMessage == nil || *a.ErrorMessage != authn.ErrAuthentication.Error() {
		t.Fatalf("refusal answer: %d %v", a.ErrorCode, a.ErrorMessage)
	}
	if v, _ := do(t, s, metadata()); v.Action != Close {
		t.Fatalf("a request after the refusal: %+v", v)
	}
}

func TestSessionLifetime(t *testing.T) {
	for _, tc := range []struct {
		name          string
		mech, max     time.Duration
		want          time.Duration
		authenticateV int16
	}{
		{"none", 0, 0, 0, 2},
		{"configured", 0, time.Minute, time.Minute, 2},
		{"mechanism", 30 * time.Second, 0, 30 * time.Second, 2},
		{"smaller of both", 30 * time.Second, time.Minute, 30 * time.Second, 2},
		{"smaller of both, configured", 2 * time.Minute, time.Minute, time.Minute, 2},
		{"not told at v0, ends all the same", 0, time.Minute, time.Minute, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g, c := testGate(tc.mech, tc.max)
			s := g.Open(nil)
			do(t, s, handshake(1, "FAKE"))
			req := authenticate("alice").(*kmsg.SASLAuthenticateRequest)
			req.Version = tc.authenticateV
			_, r := do(t, s, req)
			a := r.(*kmsg.SASLAuthenticateResponse)
			if tc.authenticateV >= 1 && time.Duration(a.SessionLifetimeMillis)*time.Millisecond != tc.want {
				t.Fatalf("lifetime told: %dms, want %v", a.SessionLifetimeMillis, tc.want)
			}
			if s.Principal() != "User:alice" {
				t.Fatalf("principal %q", s.Principal())
			}
			c.t = c.t.Add(tc.want - time.Millisecond)
			if v, _ := do(t, s, metadata()); v.Action != Pass {
				t.Fatalf("within the session: %+v", v)
			}
			c.t = c.t.Add(2 * time.Millisecond)
			v, _ := do(t, s, metadata())
			if tc.want == 0 {
				if v.Action != Pass {
					t.Fatalf("a session without lifetime ended: %+v", v)
				}
				return
			}
			if v.Action != Close || !errors.Is(v.Err, ErrSessionExpired) {
				t.Fatalf("after the session: %+v", v)
			}
		})
	}
}

func TestReauthentication(t *testing.T) {
	g, c := testGate(0, time.Minute)
	s := g.Open(nil)
	login(t, s, "alice")
	c.t = c.t.Add(2 * time.Minute)
	// Past the session, the re-authentication is still allowed.
	r := login(t, s, "alice")
	if r.SessionLifetimeMillis != time.Minute.Milliseconds() {
		t.Fatalf("renewed lifetime %d", r.SessionLifetimeMillis)
	}
	if v, _ := do(t, s, metadata()); v.Action != Pass {
		t.Fatalf("after re-authentication: %+v", v)
	}
	// Again within a second: refused, and the session goes on.
	v, resp := do(t, s, handshake(1, "FAKE"))
	if v.Action != Answer || resp.(*kmsg.SASLHandshakeResponse).ErrorCode != kerr.IllegalSaslState.Code {
		t.Fatalf("re-authentication within a second: %+v %+v", v, resp)
	}
	if v, _ := do(t, s, metadata()); v.Action != Pass {
		t.Fatalf("after a refused early re-authentication: %+v", v)
	}
	c.t = c.t.Add(time.Second)
	// A SaslAuthenticate outside an exchange is answered, not fatal.
	v, resp = do(t, s, authenticate("alice"))
	if v.Action != Answer || resp.(*kmsg.SASLAuthenticateResponse).ErrorCode != kerr.IllegalSaslState.Code {
		t.Fatalf("SaslAuthenticate after authentication: %+v %+v", v, resp)
	}

	// As someone else: refused.
	do(t, s, handshake(1, "FAKE"))
	v, resp = do(t, s, authenticate("mallory"))
	if v.Action != AnswerThenClose || resp.(*kmsg.SASLAuthenticateResponse).ErrorCode != kerr.SaslAuthenticationFailed.Code {
		t.Fatalf("re-authentication as another: %+v %+v", v, resp)
	}
	if s.Principal() != "User:alice" {
		t.Fatalf("principal after a refused change: %q", s.Principal())
	}

	// With another mechanism: the handshake is answered, the exchange
	// refused, as Kafka does.
	s = g.Open(nil)
	login(t, s, "alice")
	if v, resp = do(t, s, handshake(1, "OTHER")); v.Action != Answer || resp.(*kmsg.SASLHandshakeResponse).ErrorCode != 0 {
		t.Fatalf("re-authentication handshake with another mechanism: %+v %+v", v, resp)
	}
	v, resp = do(t, s, authenticate("alice"))
	if a := resp.(*kmsg.SASLAuthenticateResponse); v.Action != AnswerThenClose || a.ErrorCode != kerr.SaslAuthenticationFailed.Code ||
		!strings.Contains(*a.ErrorMessage, "re-authentication of mechanism FAKE") {
		t.Fatalf("re-authentication with another mechanism: %+v %+v", v, a)
	}

	// A session without end is not renewed.
	g2, _ := testGate(0, 0)
	s = g2.Open(nil)
	login(t, s, "alice")
	if v, resp = do(t, s, handshake(1, "FAKE")); v.Action != Answer || resp.(*kmsg.SASLHandshakeResponse).ErrorCode != kerr.IllegalSaslState.Code {
		t.Fatalf("re-authentication of a session without end: %+v %+v", v, resp)
	}

	// With the raw v0 flow: closed.
	s = g.Open(nil)
	login(t, s, "alice")
	if v, _ := do(t, s, handshake(0, "FAKE")); v.Action != Close || !errors.Is(v.Err, ErrIllegalState) {
		t.Fatalf("re-authentication with SaslHandshake v0: %+v", v)
	}
}

// TestLegacyTokensSCRAM runs franz-go's SCRAM client over the raw v0
// tokens against authn's server.
func TestLegacyTokensSCRAM(t *testing.T) {
	var creds authn.Credentials
	cred, err := authn.NewCredential(authn.MechanismSCRAMSHA512, []byte("pw"), authn.DefaultIterations)
	if err != nil {
		t.Fatal(err)
	}
	creds.Set("alice", authn.MechanismSCRAMSHA512, cred)
	m, err := authn.NewSCRAM(authn.MechanismSCRAMSHA512, authn.NewStore(&creds))
	if err != nil {
		t.Fatal(err)
	}
	g := New(Config{Mechanisms: []authn.Mechanism{m}, MaxSessionLifetime: time.Minute})
	for _, pw := range []string{"pw", "wrong"} {
		s := g.Open(nil)
		if v, _ := do(t, s, handshake(0, authn.MechanismSCRAMSHA512)); v.Action != AnswerThenTokens {
			t.Fatalf("handshake v0: %+v", v)
		}
		var client sasl.Mechanism = scram.Auth{User: "alice", Pass: pw}.AsSha512Mechanism()
		sess, tok, err := client.Authenticate(context.Background(), "h")
		if err != nil {
			t.Fatal(err)
		}
		v := s.Token(tok)
		if v.Action != AnswerThenTokens {
			t.Fatalf("first token: %+v", v)
		}
		_, tok, err = sess.Challenge(v.Response[4:])
		if err != nil {
			t.Fatal(err)
		}
		v = s.Token(tok)
		if pw == "wrong" {
			if v.Action != AnswerThenClose || !errors.Is(v.Err, authn.ErrAuthentication) {
				t.Fatalf("wrong password: %+v", v)
			}
			continue
		}
		if v.Action != Answer {
			t.Fatalf("final token: %+v", v)
		}
		if done, _, err := sess.Challenge(v.Response[4:]); !done || err != nil {
			t.Fatalf("server-final: %v %v", done, err)
		}
		if s.Principal() != "User:alice" {
			t.Fatalf("principal %q", s.Principal())
		}
		if v, _ := do(t, s, metadata()); v.Action != Pass {
			t.Fatalf("after the raw exchange: %+v", v)
		}
	}
}

func TestWithoutSASLEverythingPasses(t *testing.T) {
	g := New(Config{})
	if g.SASL() {
		t.Fatal("a gate without mechanisms answers SASL")
	}
	s := g.Open(nil)
	for _, req := range []kmsg.Request{metadata(), handshake(1, "PLAIN"), authenticate("x")} {
		if v, _ := do(t, s, req); v.Action != Pass {
			t.Fatalf("%s: %+v", kmsg.NameForKey(req.Key()), v)
		}
	}
}

func TestMalformed(t *testing.T) {
	g, _ := testGate(0, 0)
	s := g.Open(nil)
	h, frame := request(t, handshake(1, "FAKE"))
	if v := s.Request(h, frame[:h.Body+1]); v.Action != Close || !errors.Is(v.Err, ErrMalformed) {
		t.Fatalf("truncated handshake: %+v", v)
	}
	s = g.Open(nil)
	if v := s.Request(h, nil); v.Action != Close || !errors.Is(v.Err, ErrMalformed) {
		t.Fatalf("handshake without a body: %+v", v)
	}
}
