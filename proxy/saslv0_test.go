package proxy_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/inorder-proxy/inorder/config"
)

// rawFrame is a length-prefixed frame: a Kafka message or a raw SASL token.
func rawFrame(b []byte) []byte {
	return append(binary.BigEndian.AppendUint32(nil, uint32(len(b))), b...)
}

func readRaw(r io.Reader) ([]byte, error) {
	var n [4]byte
	if _, err := io.ReadFull(r, n[:]); err != nil {
		return nil, err
	}
	b := make([]byte, binary.BigEndian.Uint32(n[:]))
	_, err := io.ReadFull(r, b)
	return b, err
}

// readRequest reads a Kafka request and returns its key and correlation id.
func readRequest(r io.Reader) (key int16, corr int32, err error) {
	b, err := readRaw(r)
	if err != nil {
		return 0, 0, err
	}
	if len(b) < 8 {
		return 0, 0, fmt.Errorf("request of %d bytes", len(b))
	}
	return int16(binary.BigEndian.Uint16(b)), int32(binary.BigEndian.Uint32(b[4:])), nil
}

func response(corr int32, resp kmsg.Response) []byte {
	body := binary.BigEndian.AppendUint32(nil, uint32(corr))
	return rawFrame(resp.AppendTo(body))
}

// legacySASLBackend is a broker that speaks the SaslHandshake v0 flow: it
// answers the handshake (with refuse's error code), then, if it accepted,
// expects tokens and answers each with the next of answers, then answers a
// Metadata request with no brokers. It reports what it saw on seen.
func legacySASLBackend(t *testing.T, refuse int16, tokens int, answers [][]byte) (string, <-chan error, <-chan [][]byte) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	errc, seen := make(chan error, 1), make(chan [][]byte, 1)
	go func() {
		nc, err := ln.Accept()
		if err != nil {
			errc <- err
			return
		}
		defer nc.Close()
		nc.SetDeadline(time.Now().Add(20 * time.Second))
		errc <- func() error {
			key, corr, err := readRequest(nc)
			if err != nil || key != 17 {
				return fmt.Errorf("first request: key %d, %v", key, err)
			}
			hs := kmsg.NewSASLHandshakeResponse()
			hs.ErrorCode = refuse
			hs.SupportedMechanisms = []string{"PLAIN", "SCRAM-SHA-256"}
			nc.Write(response(corr, &hs))
			if refuse == 0 {
				var got [][]byte
				for i := 0; i < tokens; i++ {
					tok, err := readRaw(nc)
					if err != nil {
						return fmt.Errorf("token %d: %v", i, err)
					}
					got = append(got, tok)
					nc.Write(rawFrame(answers[i]))
				}
				seen <- got
			}
			key, corr, err = readRequest(nc)
			if err != nil || key != 3 {
				return fmt.Errorf("request after SASL: key %d, %v", key, err)
			}
			md := kmsg.NewMetadataResponse()
			md.Version = 1
			nc.Write(response(corr, &md))
			return nil
		}()
	}()
	return ln.Addr().String(), errc, seen
}

// legacyClient plays kafka-python: a SaslHandshake v0, raw tokens, then
// Kafka requests again.
func legacyClient(t *testing.T, addr, mech string, tokens [][]byte) (handshakeErr int16, answers [][]byte, metadataCorr int32) {
	t.Helper()
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	nc.SetDeadline(time.Now().Add(20 * time.Second))
	f := kmsg.NewRequestFormatter(kmsg.FormatterClientID("legacy"))
	hs := kmsg.NewPtrSASLHandshakeRequest()
	hs.Version = 0
	hs.Mechanism = mech
	nc.Write(f.AppendRequest(nil, hs, 41))
	b, err := readRaw(nc)
	if err != nil {
		t.Fatalf("handshake response: %v", err)
	}
	if corr := int32(binary.BigEndian.Uint32(b)); corr != 41 {
		t.Fatalf("handshake response correlation %d", corr)
	}
	hsResp := kmsg.NewPtrSASLHandshakeResponse()
	if err := hsResp.ReadFrom(b[4:]); err != nil {
		t.Fatal(err)
	}
	if hsResp.ErrorCode == 0 {
		for _, tok := range tokens {
			nc.Write(rawFrame(tok))
			a, err := readRaw(nc)
			if err != nil {
				t.Fatalf("token answer: %v", err)
			}
			answers = append(answers, a)
		}
	}
	md := kmsg.NewPtrMetadataRequest()
	md.Version = 1
	nc.Write(f.AppendRequest(nil, md, 42))
	b, err = readRaw(nc)
	if err != nil {
		t.Fatalf("metadata after SASL: %v", err)
	}
	return hsResp.ErrorCode, answers, int32(binary.BigEndian.Uint32(b))
}

// TestSASLv0RawTokens relays the legacy flow: SCRAM's two rounds and
// PLAIN's one as raw tokens, then Kafka framing again; a refused mechanism
// goes straight back to Kafka framing.
func TestSASLv0RawTokens(t *testing.T) {
	cases := []struct {
		mech    string
		refuse  int16
		tokens  [][]byte
		answers [][]byte
	}{
		{"SCRAM-SHA-256", 0,
			[][]byte{[]byte("n,,n=client,r=abc"), []byte("c=biws,r=abcdef,p=proof")},
			[][]byte{[]byte("r=abcdef,s=c2FsdA==,i=4096"), []byte("v=verifier")}},
		{"PLAIN", 0, [][]byte{[]byte("\x00client\x00secret")}, [][]byte{{}}},
		{"GSSAPI", kerr.UnsupportedSaslMechanism.Code, nil, nil},
	}
	for _, tc := range cases {
		for _, mode := range []config.Ordering{config.OrderingNone, config.OrderingConnection} {
			t.Run(tc.mech+"/"+string(mode), func(t *testing.T) {
				addr, errc, seen := legacySASLBackend(t, tc.refuse, len(tc.tokens), tc.answers)
				p := startProxy(t, mode, []string{addr}, nil)
				code, answers, corr := legacyClient(t, p.Addr(), tc.mech, tc.tokens)
				if err := <-errc; err != nil {
					t.Fatalf("backend: %v", err)
				}
				if code != tc.refuse || corr != 42 {
					t.Fatalf("handshake error %d, metadata correlation %d", code, corr)
				}
				if tc.refuse != 0 {
					return
				}
				got := <-seen
				for i := range tc.tokens {
					if !bytes.Equal(got[i], tc.tokens[i]) || !bytes.Equal(answers[i], tc.answers[i]) {
						t.Fatalf("round %d: backend saw %q, client got %q", i, got[i], answers[i])
					}
				}
			})
		}
	}
}

// TestSASLv0UnknownMechanismCloses: a mechanism whose rounds the proxy
// cannot know is closed with a reason rather than misframed.
func TestSASLv0UnknownMechanismCloses(t *testing.T) {
	addr, _, _ := legacySASLBackend(t, 0, 1, [][]byte{[]byte("x")})
	p := startProxy(t, config.OrderingNone, []string{addr}, nil)
	nc := legacyHandshake(t, p.Addr(), "GSSAPI")
	if _, err := readRaw(nc); !errors.Is(err, io.EOF) {
		t.Fatalf("got %v, want the connection closed", err)
	}
	p.log.waitFor(t, "GSSAPI after SaslHandshake v0")
}

// TestSASLv0SilentUpstream: an upstream that accepts the legacy handshake
// and then never answers the client's token does not hold the connection
// open: nothing reads the client while the proxy waits, so the wait has
// the read timeout, and the client is closed with a reason.
func TestSASLv0SilentUpstream(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	gotToken := make(chan error, 1)
	go func() {
		nc, err := ln.Accept()
		if err != nil {
			gotToken <- err
			return
		}
		defer nc.Close()
		nc.SetDeadline(time.Now().Add(20 * time.Second))
		key, corr, err := readRequest(nc)
		if err != nil || key != 17 {
			gotToken <- fmt.Errorf("first request: key %d, %v", key, err)
			return
		}
		hs := kmsg.NewSASLHandshakeResponse()
		hs.SupportedMechanisms = []string{"PLAIN"}
		nc.Write(response(corr, &hs))
		_, err = readRaw(nc)
		gotToken <- err
		io.Copy(io.Discard, nc) // silent until the proxy hangs up
	}()
	p := startProxy(t, config.OrderingConnection, []string{ln.Addr().String()}, func(c *config.Config) {
		c.ReadTimeout = 300 * time.Millisecond
	})
	nc := legacyHandshake(t, p.Addr(), "PLAIN")
	nc.Write(rawFrame([]byte("\x00client\x00secret")))
	if err := <-gotToken; err != nil {
		t.Fatalf("the upstream did not get the token: %v", err)
	}
	start := time.Now()
	if _, err := readRaw(nc); !errors.Is(err, io.EOF) {
		t.Fatalf("got %v, want the connection closed", err)
	}
	if waited := time.Since(start); waited > 5*time.Second {
		t.Fatalf("the connection closed %v after the token, want about the read timeout", waited)
	}
	p.log.waitFor(t, "SASL token")
}

// legacyHandshake dials addr and sends a SaslHandshake v0 for mech, whose
// response it reads; the connection closes when the test ends.
func legacyHandshake(t *testing.T, addr, mech string) net.Conn {
	t.Helper()
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	nc.SetDeadline(time.Now().Add(10 * time.Second))
	hs := kmsg.NewPtrSASLHandshakeRequest()
	hs.Version = 0
	hs.Mechanism = mech
	nc.Write(kmsg.NewRequestFormatter().AppendRequest(nil, hs, 1))
	if _, err := readRaw(nc); err != nil {
		t.Fatalf("handshake response: %v", err)
	}
	return nc
}
