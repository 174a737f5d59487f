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

// benchGate is a gate of SCRAM-SHA-512, SCRAM-SHA-256 and PLAIN over a
// store holding alice, whose password is "pw".
func benchGate(b *testing.B) *Gate {
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
	store := authn.NewStore(&creds)
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

// BenchmarkFailedPLAIN is what a refused PLAIN exchange costs the proxy:
// the handshake, then the password checked against the user's SCRAM
// credential, which takes deriving its salted key at the credential's
// iterations (4096 here, the default), for an unknown user as for a
// known one so that the time does not tell them apart. The FailureDelay
// that follows is a timer, not work, and is not here.
func BenchmarkFailedPLAIN(b *testing.B) {
	g := benchGate(b)
	hh, hs := benchFrame(b, handshake(1, authn.MechanismPLAIN))
	for _, user := range []string{"alice", "nobody"} {
		b.Run(user, func(b *testing.B) {
			ah, auth := benchFrame(b, authenticate("\x00"+user+"\x00wrong"))
			b.ReportAllocs()
			for b.Loop() {
				s := g.Open(nil)
				if v := s.Request(hh, hs); v.Action != Answer {
					b.Fatalf("handshake: %v", v.Action)
				}
				refused(b, s.Request(ah, auth))
			}
		})
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
