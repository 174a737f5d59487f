package clientauth

import (
	"bytes"
	"encoding/base64"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/inorder-proxy/inorder/authn"
	"github.com/inorder-proxy/inorder/wire"
)

// benchFrame frames req as a client would, with its header parsed as the
// proxy parses it.
func benchFrame(b *testing.B, req kmsg.Request) (wire.RequestHeader, []byte) {
	b.Helper()
	frame := kmsg.NewRequestFormatter(kmsg.FormatterClientID("kgo")).AppendRequest(nil, req, 1)
	h, err := wire.ParseRequestHeader(frame)
	if err != nil {
		b.Fatal(err)
	}
	return h, frame
}

// benchStore holds alice, whose password is "pw", for SCRAM-SHA-512 and
// SCRAM-SHA-256.
func benchStore(b *testing.B) *authn.Store {
	b.Helper()
	var creds authn.Credentials
	for _, m := range authn.SCRAMMechanisms() {
		cred, err := authn.NewCredential(m, []byte("pw"), authn.DefaultIterations)
		if err != nil {
			b.Fatal(err)
		}
		if err := creds.Set("alice", m, cred); err != nil {
			b.Fatal(err)
		}
	}
	return authn.NewStore(&creds)
}

// benchGate is a gate of SCRAM-SHA-512, SCRAM-SHA-256 and PLAIN over
// benchStore.
func benchGate(b *testing.B) *Gate {
	b.Helper()
	store := benchStore(b)
	var mechs []authn.Mechanism
	for _, m := range authn.SCRAMMechanisms() {
		mech, err := authn.NewSCRAM(m, store)
		if err != nil {
			b.Fatal(err)
		}
		mechs = append(mechs, mech)
	}
	mechs = append(mechs, authn.NewPlain(store, authn.PlainOptions{AllowWithoutTLS: true}))
	return New(Config{Mechanisms: mechs})
}

// refused checks that v is the refusal of an exchange: the answer, then
// the close after authn.FailureDelay.
func refused(b *testing.B, v Verdict) {
	if v.Action != AnswerThenClose || len(v.Response) == 0 || v.Delay != authn.FailureDelay {
		b.Fatalf("verdict %v (%d bytes, delay %v), want the refusal", v.Action, len(v.Response), v.Delay)
	}
}

// BenchmarkFailedSCRAM is what a refused SCRAM-SHA-512 exchange costs the
// proxy, from the SaslHandshake to the refusal of the proof: the
// handshake answered, the first message read and answered with the salt,
// the proof checked and refused. The proof is what a wrong password
// gives: bytes the server cannot tell from any other. Nothing is derived
// from a password on the server, for an unknown user as for a known one
// (whose salt is made up from the name). The client's side, building its
// final message from the server's nonce, is in the loop too. The
// FailureDelay that holds the connection before it closes is a timer in
// the proxy, not work, and is not here.
func BenchmarkFailedSCRAM(b *testing.B) {
	g := benchGate(b)
	hh, hs := benchFrame(b, handshake(1, authn.MechanismSCRAMSHA512))
	proof := base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{0x5a}, 64))
	for _, user := range []string{"alice", "nobody"} {
		b.Run(user, func(b *testing.B) {
			fh, first := benchFrame(b, authenticate("n,,n="+user+",r=fyko+d2lbbFgONRv9qkxdawL"))
			b.ReportAllocs()
			for b.Loop() {
				s := g.Open(nil)
				if v := s.Request(hh, hs); v.Action != Answer {
					b.Fatalf("handshake: %v", v.Action)
				}
				v := s.Request(fh, first)
				if v.Action != Answer {
					b.Fatalf("client-first: %v", v.Action)
				}
				// The server-first message ends the response: r=nonce,s=salt,i=4096.
				serverFirst := v.Response[bytes.Index(v.Response, []byte("r=")):]
				nonce := serverFirst[2:bytes.IndexByte(serverFirst, ',')]
				final := kmsg.NewPtrSASLAuthenticateRequest()
				final.Version = 2
				final.SASLAuthBytes = append(append([]byte("c=biws,r="), nonce...), ",p="+proof...)
				h, f := benchFrame(b, final)
				refused(b, s.Request(h, f))
			}
		})
	}
}

// plainExchange runs a PLAIN exchange on a new session of g, from the
// SaslHandshake to the verdict on the password.
func plainExchange(b *testing.B, g *Gate, hh wire.RequestHeader, hs []byte, ah wire.RequestHeader, auth []byte) Verdict {
	s := g.Open(nil)
	if v := s.Request(hh, hs); v.Action != Answer {
		b.Fatalf("handshake: %v", v.Action)
	}
	return s.Request(ah, auth)
}

// BenchmarkFailedPLAIN is what a refused PLAIN exchange costs the proxy:
// the handshake, then the password checked. Checking a password against a
// SCRAM credential takes deriving its salted key at the credential's
// iterations (4096 here, the default), milliseconds; the proxy does it
// once per user, the first time the user authenticates ("first", where
// at most one derivation per two cores runs at once), and keeps a keyed
// digest of the password proven, against which a wrong password
// ("proven") is refused in microseconds. An unknown user is refused at
// once. The FailureDelay that follows is a timer, not work, and is not
// here.
func BenchmarkFailedPLAIN(b *testing.B) {
	store := benchStore(b)
	hh, hs := benchFrame(b, handshake(1, authn.MechanismPLAIN))
	wh, wrong := benchFrame(b, authenticate("\x00alice\x00wrong"))
	b.Run("first", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			g := New(Config{Mechanisms: []authn.Mechanism{authn.NewPlain(store, authn.PlainOptions{AllowWithoutTLS: true})}})
			refused(b, plainExchange(b, g, hh, hs, wh, wrong))
		}
	})
	g := New(Config{Mechanisms: []authn.Mechanism{authn.NewPlain(store, authn.PlainOptions{AllowWithoutTLS: true})}})
	rh, right := benchFrame(b, authenticate("\x00alice\x00pw"))
	if v := plainExchange(b, g, hh, hs, rh, right); v.Action != Answer || v.Err != nil {
		b.Fatalf("alice's password: %v, %v", v.Action, v.Err)
	}
	b.Run("proven", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			refused(b, plainExchange(b, g, hh, hs, wh, wrong))
		}
	})
	nh, nobody := benchFrame(b, authenticate("\x00nobody\x00wrong"))
	b.Run("unknown", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			refused(b, plainExchange(b, g, hh, hs, nh, nobody))
		}
	})
}

// BenchmarkPLAIN is a PLAIN exchange that succeeds, for a user whose
// password the proxy has proven before: checked against the keyed digest
// it kept, without a key derivation.
func BenchmarkPLAIN(b *testing.B) {
	g := New(Config{Mechanisms: []authn.Mechanism{authn.NewPlain(benchStore(b), authn.PlainOptions{AllowWithoutTLS: true})}})
	hh, hs := benchFrame(b, handshake(1, authn.MechanismPLAIN))
	rh, right := benchFrame(b, authenticate("\x00alice\x00pw"))
	b.ReportAllocs()
	for b.Loop() {
		if v := plainExchange(b, g, hh, hs, rh, right); v.Action != Answer || v.Err != nil {
			b.Fatalf("alice's password: %v, %v", v.Action, v.Err)
		}
	}
}

// BenchmarkRefusedMechanism is the cheapest refusal: a SaslHandshake
// naming a mechanism that is not enabled, answered with the enabled list.
func BenchmarkRefusedMechanism(b *testing.B) {
	g := benchGate(b)
	h, f := benchFrame(b, handshake(1, "GSSAPI"))
	b.ReportAllocs()
	for b.Loop() {
		refused(b, g.Open(nil).Request(h, f))
	}
}
