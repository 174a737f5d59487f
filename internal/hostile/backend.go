package hostile

import (
	"fmt"
	"net"

	"github.com/twmb/franz-go/pkg/kfake"
)

// advertisingListener is a kfake listener whose Addr lies: kfake builds the
// host and port it hands out in Metadata, FindCoordinator, DescribeCluster,
// and KIP-951 leader hints from its listener's Addr, so this is the one
// place to make it advertise a server in front of it.
type advertisingListener struct {
	net.Listener
	advertise net.Addr
}

func (l advertisingListener) Addr() net.Addr { return l.advertise }

// newCluster starts a one-broker kfake that advertises advertise. It
// returns the address kfake really listens on. NumBrokers is forced to 1
// after opts because each backend forwards to exactly one broker.
func newCluster(advertise net.Addr, opts []kfake.Opt) (*kfake.Cluster, string, error) {
	var real net.Addr
	listen := func(network, address string) (net.Listener, error) {
		ln, err := net.Listen(network, address)
		if err != nil {
			return nil, err
		}
		real = ln.Addr()
		return advertisingListener{Listener: ln, advertise: advertise}, nil
	}
	all := append(append([]kfake.Opt(nil), opts...), kfake.NumBrokers(1), kfake.ListenFn(listen))
	c, err := kfake.NewCluster(all...)
	if err != nil {
		return nil, "", fmt.Errorf("hostile: starting kfake: %w", err)
	}
	return c, real.String(), nil
}

// base is what every backend shares: the front server and the cluster
// behind it.
type base struct {
	srv       *server
	cluster   *kfake.Cluster
	kfakeAddr string
}

func newBase(listen string, opts []kfake.Opt) (base, error) {
	srv, err := newServer(listen)
	if err != nil {
		return base{}, err
	}
	c, addr, err := newCluster(srv.ln.Addr(), opts)
	if err != nil {
		srv.close()
		return base{}, err
	}
	return base{srv: srv, cluster: c, kfakeAddr: addr}, nil
}

// Addr returns the backend's host:port, the address clients should dial.
func (b *base) Addr() string { return b.srv.ln.Addr().String() }

// KfakeAddr returns the address the kfake broker really listens on. The
// broker advertises Addr, so a client bootstrapping here follows the
// advertisement back to the backend unless it pins its dials.
func (b *base) KfakeAddr() string { return b.kfakeAddr }

// Cluster returns the kfake cluster behind the backend, for control
// functions and topic setup.
func (b *base) Cluster() *kfake.Cluster { return b.cluster }

// Close closes the listener and every connection, waits for every
// goroutine, and then shuts the cluster down. It is idempotent.
func (b *base) Close() error {
	b.srv.close()
	b.cluster.Close()
	return nil
}
