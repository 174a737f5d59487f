package proxy_test

import (
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/inorder-proxy/inorder/config"
	"github.com/inorder-proxy/inorder/internal/hostile"
	"github.com/inorder-proxy/inorder/metrics"
	"github.com/inorder-proxy/inorder/proxy"
)

// pingThrough sends one Metadata request through the proxy from a new
// client, which gets a bootstrap connection of its own, without retries.
func pingThrough(t *testing.T, p *testProxy) error {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(p.Addr()), kgo.RequestRetries(0))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	return cl.Ping(testContext(t, 10*time.Second))
}

// TestUpstreamDropDuringSASLIsNotARefusal: the upstream connection is
// closed or reset in the middle of the proxy's SaslAuthenticate. That is
// a failed connection, not refused credentials: the client is served
// through the next bootstrap address, nothing backs off, nothing is
// logged as an authentication failure, and the proxy stays ready.
func TestUpstreamDropDuringSASLIsNotARefusal(t *testing.T) {
	for _, drop := range []string{"close", "reset"} {
		t.Run(drop, func(t *testing.T) {
			kc := newCluster(t, kfake.NumBrokers(1), kfake.EnableSASL(), kfake.Superuser(config.MechanismPlain, "inorder", "right"))
			var relays []*hostile.Relay
			for range 2 {
				r, err := hostile.NewRelay("127.0.0.1:0", kc.ListenAddrs()[0])
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { r.Close() })
				relays = append(relays, r)
			}
			var drops atomic.Int64 // SaslAuthenticate requests; the first is dropped
			kc.ControlKey(int16(kmsg.SASLAuthenticate), func(kmsg.Request) (kmsg.Response, error, bool) {
				kc.KeepControl()
				if drops.Add(1) > 1 {
					return nil, nil, false
				}
				if drop == "reset" {
					for _, r := range relays {
						r.Cut()
					}
				}
				return nil, errors.New("connection dropped by the test"), true
			})
			m := metrics.New()
			p := startProxy(t, config.OrderingNone, []string{relays[0].Addr(), relays[1].Addr()}, func(c *config.Config) {
				c.UpstreamSASLMechanism = config.MechanismPlain
				c.UpstreamSASLUsername = "inorder"
				c.UpstreamSASLPasswordFile = writeSecret(t, "right")
			}, proxy.WithMetrics(m))

			if err := pingThrough(t, p); err != nil {
				t.Fatalf("a drop during SaslAuthenticate was not retried on the next address: %v\n%s", err, p.log)
			}
			if drops.Load() < 2 {
				t.Fatalf("%d SaslAuthenticate requests: the one dropped was not retried", drops.Load())
			}
			if err := pingThrough(t, p); err != nil {
				t.Fatalf("the proxy backs off after a dropped connection: %v\n%s", err, p.log)
			}
			if err := p.Discover(testContext(t, 10*time.Second)); err != nil {
				t.Fatal(err)
			}
			if err := p.Ready(); err != nil {
				t.Fatalf("Ready() = %v after a dropped connection", err)
			}
			log := p.log.String()
			if strings.Contains(log, "upstream authentication failed") || strings.Contains(log, "level=ERROR") {
				t.Errorf("a dropped connection was logged as refused credentials:\n%s", log)
			}
			if !strings.Contains(log, `level=WARN msg="upstream closed the connection during SASL authentication; client connections to it are closed"`) {
				t.Errorf("the dropped connection was not logged as a connection failure:\n%s", log)
			}
			if n, _ := findCounter(t, m, metrics.NameSASLAuthentications, "mechanism", "PLAIN", "result", "failure"); n != 0 {
				t.Errorf("%v failed authentications counted for a dropped connection", n)
			}
		})
	}
}

// TestRefusalBacksOffPerBroker: one broker of two refuses the proxy's
// credentials with an error answer, as a broker that does not know the
// user yet would. Clients are served through the other one throughout;
// only the refusing broker backs off, and the proxy stays ready.
func TestRefusalBacksOffPerBroker(t *testing.T) {
	kc := newCluster(t, kfake.NumBrokers(2), kfake.EnableSASL(), kfake.Superuser(config.MechanismPlain, "inorder", "right"))
	var refused atomic.Int64
	kc.ControlKey(int16(kmsg.SASLAuthenticate), func(req kmsg.Request) (kmsg.Response, error, bool) {
		kc.KeepControl()
		if kc.CurrentNode() != 0 {
			return nil, nil, false
		}
		refused.Add(1)
		resp := req.ResponseKind().(*kmsg.SASLAuthenticateResponse)
		resp.ErrorCode = kerr.SaslAuthenticationFailed.Code
		return resp, nil, true
	})
	addrs := kc.ListenAddrs()
	p := startProxy(t, config.OrderingNone, addrs, func(c *config.Config) {
		c.UpstreamSASLMechanism = config.MechanismPlain
		c.UpstreamSASLUsername = "inorder"
		c.UpstreamSASLPasswordFile = writeSecret(t, "right")
	})
	// Each client's bootstrap connection starts at the next address, so
	// some of them try the refusing broker first.
	for i := range 6 {
		if err := pingThrough(t, p); err != nil {
			t.Fatalf("client %d: %v\n%s", i, err, p.log)
		}
	}
	if refused.Load() == 0 {
		t.Fatal("the refusing broker was never tried")
	}
	p.log.waitFor(t, `msg="upstream authentication failed" upstream=`+addrs[0])
	if err := p.Discover(testContext(t, 10*time.Second)); err != nil {
		t.Fatal(err)
	}
	if err := p.Ready(); err != nil {
		t.Fatalf("Ready() = %v while one of two brokers refuses", err)
	}
	if strings.Contains(p.log.String(), `msg="upstream authentication failed" upstream=`+addrs[1]) {
		t.Errorf("the broker that accepts was logged as refusing:\n%s", p.log)
	}
}
