package proxy_test

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/inorder-proxy/inorder/config"
	"github.com/inorder-proxy/inorder/proxy"
	"github.com/inorder-proxy/inorder/upauth"
)

// The upstream users of the principal-credentials tests, and their
// passwords, which must never reach a log.
const (
	upUserA, upPassA = "app-a", "upstream-pw-a-7f3c"
	upUserB, upPassB = "app-b", "upstream-pw-b-91d2"
	upPassBEnv       = "INORDER_TEST_UPSTREAM_PW_B"
	// The cluster's superuser: the proxy's own identity where it has
	// one (the single topology's view of the cluster).
	upAdmin, upAdminPass = "admin", "admin-secret"
)

// countingListener counts the connections a broker accepts.
type countingListener struct {
	net.Listener
	n *atomic.Int64
}

func (l countingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err == nil {
		l.n.Add(1)
	}
	return c, err
}

// writeACLs lets user write and describe topic, and nothing else.
func writeACLs(topic string) []kfake.ACL {
	var acls []kfake.ACL
	for _, op := range []kmsg.ACLOperation{kmsg.ACLOperationWrite, kmsg.ACLOperationDescribe} {
		acls = append(acls, kfake.ACL{Resource: kmsg.ACLResourceTypeTopic, Name: topic,
			Pattern: kmsg.ACLResourcePatternTypeLiteral, Operation: op, Allow: true})
	}
	return acls
}

// aclCluster is a kfake cluster requiring SASL and enforcing ACLs: app-a
// may write topic ta, app-b topic tb. accepts counts its connections.
func aclCluster(t *testing.T) (*kfake.Cluster, *atomic.Int64) {
	t.Helper()
	accepts := new(atomic.Int64)
	kc := newCluster(t, kfake.NumBrokers(1), kfake.EnableSASL(), kfake.EnableACLs(),
		kfake.Superuser("SCRAM-SHA-256", upAdmin, upAdminPass),
		kfake.User("SCRAM-SHA-256", upUserA, upPassA, writeACLs("ta")...),
		kfake.User("SCRAM-SHA-512", upUserB, upPassB, writeACLs("tb")...),
		kfake.SeedTopics(1, "ta", "tb"),
		kfake.ListenFn(func(network, addr string) (net.Listener, error) {
			ln, err := net.Listen(network, addr)
			if err != nil {
				return nil, err
			}
			return countingListener{ln, accepts}, nil
		}))
	return kc, accepts
}

// principalsFile writes a mapping: alice to app-a by a password file, and,
// if withBob, bob to app-b by an environment variable.
func principalsFile(t *testing.T, withBob bool, passB string) *upauth.Principals {
	t.Helper()
	dir := t.TempDir()
	pwA := filepath.Join(dir, "a")
	if err := os.WriteFile(pwA, []byte(upPassA+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	doc := "principals:\n  User:alice:\n    mechanism: SCRAM-SHA-256\n    username: " + upUserA + "\n    passwordFile: " + pwA + "\n"
	if withBob {
		doc += "  User:bob:\n    mechanism: SCRAM-SHA-512\n    username: " + upUserB + "\n    passwordEnv: " + upPassBEnv + "\n"
	}
	path := filepath.Join(dir, "principals.yaml")
	if err := os.WriteFile(path, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	m, err := upauth.LoadPrincipals(path, func(k string) string {
		if k == upPassBEnv {
			return passB
		}
		return ""
	})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// principalProxy runs a proxy authenticating clients (authUsers) in front
// of kc, mapping principals by ids, in topology; the options are what a
// kgo client needs to reach it.
func principalProxy(t *testing.T, kc *kfake.Cluster, topology config.Topology, ids *upauth.Principals) (*testProxy, []kgo.Opt) {
	return principalProxyLife(t, kc, topology, ids, 0)
}

// principalProxyLife is principalProxy whose client sessions last life
// (0: no end). The single topology's proxy has credentials of its own, the
// cluster's superuser, which its view of the cluster needs (and the
// configuration requires); the others have none.
func principalProxyLife(t *testing.T, kc *kfake.Cluster, topology config.Topology, ids *upauth.Principals, life time.Duration) (*testProxy, []kgo.Opt) {
	return principalProxyOwn(t, kc, topology, ids, life, topology == config.TopologySingle)
}

// principalProxyOwn is principalProxyLife, with the proxy's own
// credentials (the superuser's) if own.
func principalProxyOwn(t *testing.T, kc *kfake.Cluster, topology config.Topology, ids *upauth.Principals, life time.Duration, own bool) (*testProxy, []kgo.Opt) {
	t.Helper()
	opts := []proxy.Option{proxy.WithClientAuth(authGate(t, nil, life, true)), proxy.WithUpstreamIdentities(ids)}
	var p *testProxy
	var clientOpts []kgo.Opt
	if topology == config.TopologySNI {
		sp := startSNIProxy(t, config.OrderingNone, kc.ListenAddrs(), nil, opts...)
		p, clientOpts = sp.testProxy, []kgo.Opt{sp.dialer(t)}
	} else {
		p = startProxy(t, config.OrderingNone, kc.ListenAddrs(), func(c *config.Config) {
			c.Topology = topology
			if own {
				c.UpstreamSASLMechanism, c.UpstreamSASLUsername = config.MechanismScramSHA256, upAdmin
				c.UpstreamSASLPasswordFile = writeSecret(t, upAdminPass)
			}
		}, opts...)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("proxy log:\n%s", p.log.String())
		}
	})
	// What a started proxy does first: learn the brokers and the API
	// versions. Without credentials of its own the brokers stay unlisted,
	// and the single topology's view stays empty.
	err := p.Discover(testContext(t, 10*time.Second))
	switch {
	case err == nil, errors.Is(err, proxy.ErrUpstreamNeedsCredentials):
	case !own && topology == config.TopologySingle:
		t.Logf("discovery without credentials: %v", err)
	default:
		t.Fatal(err)
	}
	return p, clientOpts
}

// produceAs produces one record to topic as user through addr.
func produceAs(t *testing.T, addr, user, topic string, opts ...kgo.Opt) error {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(addr), kgo.SASL(scram.Auth{User: user, Pass: authUsers[user]}.AsSha256Mechanism()),
		kgo.DisableIdempotentWrite(), kgo.RequestRetries(0), kgo.ProducerLinger(0)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: []byte(user)}).FirstErr()
}

// TestUpstreamPrincipalCredentials: two clients authenticated at the proxy
// as alice and bob reach the broker as app-a and app-b, each allowed and
// denied by the broker's ACLs as its own user, in every topology (in the
// single one, though the proxy's own identity is the superuser's). No
// password reaches the log.
func TestUpstreamPrincipalCredentials(t *testing.T) {
	for _, topology := range []config.Topology{config.TopologyPorts, config.TopologySNI, config.TopologySingle} {
		t.Run(string(topology), func(t *testing.T) {
			kc, _ := aclCluster(t)
			p, opts := principalProxy(t, kc, topology, principalsFile(t, true, upPassB))
			for _, tc := range []struct {
				user, allowed, denied string
			}{{"alice", "ta", "tb"}, {"bob", "tb", "ta"}} {
				if err := produceAs(t, p.Addr(), tc.user, tc.allowed, opts...); err != nil {
					t.Errorf("%s producing to %s: %v, want it allowed (the broker's ACLs let its upstream user)", tc.user, tc.allowed, err)
				}
				if err := produceAs(t, p.Addr(), tc.user, tc.denied, opts...); !errors.Is(err, kerr.TopicAuthorizationFailed) {
					t.Errorf("%s producing to %s: %v, want TOPIC_AUTHORIZATION_FAILED from the broker", tc.user, tc.denied, err)
				}
			}
			logged := p.log.String()
			for _, secret := range []string{upPassA, upPassB} {
				if strings.Contains(logged, secret) {
					t.Errorf("the log holds an upstream password")
				}
			}
		})
	}
}

// TestUpstreamPrincipalUnmapped: a principal the mapping leaves out, with
// no credentials of the proxy's own, is refused once it has authenticated,
// and the log names it; a mapped principal whose upstream password is
// wrong is refused by the broker, and the log says so without the
// password. The single topology refuses alike (its proxy built without
// credentials of its own, which its configuration would require).
func TestUpstreamPrincipalUnmapped(t *testing.T) {
	for _, topology := range []config.Topology{config.TopologyPorts, config.TopologySingle} {
		t.Run(string(topology), func(t *testing.T) {
			kc, _ := aclCluster(t)
			p, _ := principalProxyOwn(t, kc, topology, principalsFile(t, false, ""), 0, false)
			c := dialAuth(t, p.Addr())
			c.scramLogin(scram.Auth{User: "bob", Pass: authUsers["bob"]}.AsSha256Mechanism())
			c.send(kmsg.NewPtrMetadataRequest())
			c.waitClosed()
			p.log.waitFor(t, "principal=User:bob")
			if !strings.Contains(p.log.String(), "has no upstream credentials") {
				t.Errorf("the log does not say why bob was refused")
			}

			const wrong = "not-the-upstream-pw-5e1a"
			p2, _ := principalProxy(t, kc, topology, principalsFile(t, true, wrong))
			if err := produceAs(t, p2.Addr(), "bob", "tb"); err == nil {
				t.Fatal("bob produced with a wrong upstream password")
			}
			p2.log.waitFor(t, `as user \"`+upUserB+`\"`)
			if !strings.Contains(p2.log.String(), "entry User:bob") {
				t.Errorf("the log does not name the mapping entry to check")
			}
			if strings.Contains(p2.log.String(), wrong) {
				t.Errorf("the log holds the upstream password")
			}
		})
	}
}

// TestUpstreamPrincipalNoDialBeforeAuthentication: a client that has not
// authenticated costs the broker no connection, though its ApiVersions is
// answered with the broker's versions; once it authenticates, its
// connection is dialled, and a re-authentication as the same principal
// dials nothing more, while one as another principal is refused and the
// connection closed, as Kafka does. In the single topology the dials
// counted are those of client connections: the view of the cluster keeps
// connections of its own, in the proxy's name.
func TestUpstreamPrincipalNoDialBeforeAuthentication(t *testing.T) {
	for _, topology := range []config.Topology{config.TopologyPorts, config.TopologySingle} {
		t.Run(string(topology), func(t *testing.T) { noDialBeforeAuthentication(t, topology) })
	}
}

func noDialBeforeAuthentication(t *testing.T, topology config.Topology) {
	kc, accepts := aclCluster(t)
	// dialled counts the upstream connections of client connections.
	var dialled func() int64
	if topology == config.TopologySingle {
		count, restore := proxy.CountSingleDials()
		t.Cleanup(restore) // after the proxy's close, registered later
		dialled = func() int64 {
			n := 0
			for _, addr := range kc.ListenAddrs() {
				n += count(addr)
			}
			return int64(n)
		}
	}
	p, _ := principalProxyLife(t, kc, topology, principalsFile(t, true, upPassB), time.Minute)
	if dialled == nil {
		before := accepts.Load()
		dialled = func() int64 { return accepts.Load() - before }
	}

	c := dialAuth(t, p.Addr())
	av := kmsg.NewPtrApiVersionsRequest()
	av.Version = 3
	av.ClientSoftwareName, av.ClientSoftwareVersion = "raw", "1"
	resp := c.do(av).(*kmsg.ApiVersionsResponse)
	if resp.ErrorCode != 0 {
		t.Fatalf("ApiVersions: error %d", resp.ErrorCode)
	}
	keys := make(map[int16]bool)
	for _, k := range resp.ApiKeys {
		keys[k.ApiKey] = true
	}
	for _, key := range []int16{0, 1, 3, 17, 36} {
		if !keys[key] {
			t.Errorf("ApiVersions before authentication lists no %s", kmsg.NameForKey(key))
		}
	}
	// A failed login, then a client that only connects and goes.
	hs := kmsg.NewPtrSASLHandshakeRequest()
	hs.Version, hs.Mechanism = 1, "SCRAM-SHA-256"
	c.do(hs)
	a := kmsg.NewPtrSASLAuthenticateRequest()
	a.Version, a.SASLAuthBytes = 2, []byte("n,,n=alice,r=abc")
	c.send(a)
	c.nc.Close()
	idle := dialAuth(t, p.Addr())
	idle.nc.Close()
	time.Sleep(200 * time.Millisecond)
	if n := dialled(); n != 0 {
		t.Fatalf("the broker accepted %d connections for clients that never authenticated", n)
	}

	ok := dialAuth(t, p.Addr())
	ok.do(av)
	ok.scramLogin(scram.Auth{User: "alice", Pass: authUsers["alice"]}.AsSha256Mechanism())
	md := kmsg.NewPtrMetadataRequest()
	topic := "ta"
	md.Topics = []kmsg.MetadataRequestTopic{{Topic: &topic}}
	mresp := ok.do(md).(*kmsg.MetadataResponse)
	if len(mresp.Topics) != 1 || mresp.Topics[0].ErrorCode != 0 {
		t.Fatalf("metadata of ta as alice: %+v", mresp.Topics)
	}
	if n := dialled(); n != 1 {
		t.Fatalf("the broker accepted %d connections for one authenticated client, want 1", n)
	}

	// A re-authentication as the same principal (KIP-368) keeps the
	// upstream connection; one as another principal closes the client's.
	time.Sleep(1100 * time.Millisecond) // Kafka's least time between two
	ok.scramLogin(scram.Auth{User: "alice", Pass: authUsers["alice"]}.AsSha256Mechanism())
	if mresp := ok.do(md).(*kmsg.MetadataResponse); len(mresp.Topics) != 1 || mresp.Topics[0].ErrorCode != 0 {
		t.Fatalf("metadata of ta after re-authenticating: %+v", mresp.Topics)
	}
	if n := dialled(); n != 1 {
		t.Fatalf("the broker accepted %d connections after a re-authentication, want still 1", n)
	}
	time.Sleep(1100 * time.Millisecond)
	hs = kmsg.NewPtrSASLHandshakeRequest()
	hs.Version, hs.Mechanism = 1, "SCRAM-SHA-256"
	ok.do(hs)
	mech := scram.Auth{User: "bob", Pass: authUsers["bob"]}.AsSha256Mechanism()
	sess, first, err := mech.Authenticate(context.Background(), "proxy")
	if err != nil {
		t.Fatal(err)
	}
	a = kmsg.NewPtrSASLAuthenticateRequest()
	a.Version, a.SASLAuthBytes = 2, first
	r := ok.do(a).(*kmsg.SASLAuthenticateResponse)
	if _, final, err := sess.Challenge(r.SASLAuthBytes); err == nil {
		a = kmsg.NewPtrSASLAuthenticateRequest()
		a.Version, a.SASLAuthBytes = 2, final
		if r := ok.do(a).(*kmsg.SASLAuthenticateResponse); r.ErrorCode != kerr.SaslAuthenticationFailed.Code {
			t.Errorf("re-authentication as bob: error %d, want SASL_AUTHENTICATION_FAILED", r.ErrorCode)
		}
	}
	ok.waitClosed()
}
