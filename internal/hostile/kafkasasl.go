package hostile

import (
	"encoding/binary"
	"net"
	"sync/atomic"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// KafkaSASL is an honest backend that refuses SASL credentials the way
// Apache Kafka does, where kfake does not: kfake closes the connection on
// a SaslAuthenticate it refuses, while Kafka answers it with
// SASL_AUTHENTICATION_FAILED and then closes (KIP-152). KafkaSASL serves
// each client connection in order over a kfake connection of its own and,
// when kfake closes instead of answering a SaslAuthenticate, writes that
// answer before closing, so that a test can tell a refusal from a dropped
// connection as it would against Kafka. Give it kfake.EnableSASL and the
// users in opts.
type KafkaSASL struct {
	base
	refusals atomic.Int64
}

// NewKafkaSASL starts a KafkaSASL backend and the kfake cluster behind it.
func NewKafkaSASL(opts ...kfake.Opt) (*KafkaSASL, error) {
	b, err := newBase("", opts)
	if err != nil {
		return nil, err
	}
	k := &KafkaSASL{base: b}
	b.srv.start(k.serveClient)
	return k, nil
}

// Refusals counts the SaslAuthenticate requests answered with
// SASL_AUTHENTICATION_FAILED.
func (k *KafkaSASL) Refusals() int64 { return k.refusals.Load() }

func (k *KafkaSASL) serveClient(c net.Conn) {
	up, err := k.srv.dial(k.kfakeAddr)
	if err != nil {
		return
	}
	defer k.srv.release(up)
	for {
		req, err := readRequest(c)
		if err != nil {
			return
		}
		if _, err := up.Write(req.frame); err != nil {
			return
		}
		if req.noResponse {
			continue
		}
		resp, err := readFrame(up, minResponse)
		if err != nil {
			if req.key == int16(kmsg.SASLAuthenticate) {
				k.refusals.Add(1)
				c.Write(refusal(req))
			}
			return
		}
		if _, err := c.Write(resp); err != nil {
			return
		}
	}
}

// refusal is Kafka's answer to a SaslAuthenticate whose credentials it
// refuses, with the message Kafka writes.
func refusal(req request) []byte {
	resp := kmsg.NewPtrSASLAuthenticateResponse()
	resp.SetVersion(req.version)
	resp.ErrorCode = kerr.SaslAuthenticationFailed.Code
	msg := "Authentication failed during authentication due to invalid credentials with SASL mechanism"
	resp.ErrorMessage = &msg
	frame := []byte{0, 0, 0, 0}
	frame = binary.BigEndian.AppendUint32(frame, uint32(req.corr))
	if resp.IsFlexible() {
		frame = append(frame, 0) // the response header's empty tag section
	}
	frame = resp.AppendTo(frame)
	binary.BigEndian.PutUint32(frame, uint32(len(frame)-4))
	return frame
}
