package bench

import (
	"crypto/tls"
	"fmt"
	"net"
	"strconv"
	"strings"

	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/inorder-proxy/inorder/internal/hostile"
)

// BrokerKind is what an embedded broker does with the traffic it gets.
type BrokerKind string

const (
	// Blackhole accepts produce requests and discards the records, so
	// that storage never limits produce throughput.
	Blackhole BrokerKind = "blackhole"
	// Synthetic serves a canned batch of random records from any offset of
	// any partition, so that consumers are never starved.
	Synthetic BrokerKind = "synthetic"
	// Plain stores records like a broker, for checking end to end that
	// what was produced can be consumed.
	Plain BrokerKind = "plain"
)

// Misbehavior is how a broker breaks Kafka's per-connection ordering, so
// that a gate meant to catch such a backend (inorder check, serve
// --verify) can be seen failing before a pass is trusted.
type Misbehavior string

const (
	// Reorder answers a connection's pipelined requests concurrently and
	// in completion order: responses come back out of order and writes to
	// one partition are appended out of order.
	Reorder Misbehavior = "reorder"
	// Swap processes a connection's requests in order, so the log keeps
	// the order sent, but writes one response in 200 after the next one.
	Swap Misbehavior = "swap"
)

// BrokerConfig describes an embedded single-node kfake cluster.
type BrokerConfig struct {
	// Kind is what the broker does; empty means Blackhole.
	Kind BrokerKind
	// Port is the port the broker listens on at 127.0.0.1, the only
	// interface kfake listens on. Zero picks a free port.
	Port int
	// Advertise, when set, is the host:port the broker hands out in
	// metadata instead of its own address: the address of a relay in front
	// of it, so that clients of the relay never bypass it after bootstrap.
	Advertise string
	// RecordBytes is the value size of a Synthetic broker's records. Zero
	// means 1024. Their bytes are random so that no codec shrinks them.
	RecordBytes int
	// TLS, when set, makes the broker's listener speak TLS. Nil is
	// plaintext.
	TLS *tls.Config
	// Topics are created at start, each with its number of partitions,
	// partition p led by broker p modulo Brokers. Others can be created
	// with CreateTopics, as the load generator does; kfake picks their
	// leaders at random.
	Topics map[string]int32
	// Brokers is how many brokers the cluster has, on Port and the ports
	// after it (all free ones when Port is zero). Zero means one. More
	// than one cannot be given an Advertise address.
	Brokers int
	// Misbehave, when set, serves a Plain broker through a backend that
	// breaks per-connection ordering that way (internal/hostile's), on
	// Port. It takes neither Advertise, TLS nor more than one broker.
	// Empty keeps the order, as Kafka does.
	Misbehave Misbehavior
}

// Broker is a running embedded broker.
type Broker struct {
	Cluster *kfake.Cluster
	addrs   []string
	// closeBackend and misbehaved are a misbehaving broker's: its backend's
	// close and count of responses written out of order.
	closeBackend func()
	misbehaved   func() int64
}

// advertisedListener reports the address clients should dial instead of its
// own; kfake puts a listener's Addr in every broker address it answers with.
type advertisedListener struct {
	net.Listener
	addr net.Addr
}

func (l advertisedListener) Addr() net.Addr { return l.addr }

// NewBroker starts the broker described by cfg.
func NewBroker(cfg BrokerConfig) (*Broker, error) {
	if cfg.Misbehave != "" {
		return newMisbehaving(cfg)
	}
	b := &Broker{}
	n := max(cfg.Brokers, 1)
	if n > 1 && cfg.Advertise != "" {
		return nil, fmt.Errorf("bench: Advertise %q names one address for %d brokers", cfg.Advertise, n)
	}
	ports := make([]int, n)
	for i := range ports {
		if cfg.Port != 0 {
			ports[i] = cfg.Port + i
		}
	}
	opts := []kfake.Opt{kfake.NumBrokers(n), kfake.Ports(ports...)}
	switch cfg.Kind {
	case "", Blackhole:
		opts = append(opts, kfake.BlackholeProduce())
	case Synthetic:
		size := cfg.RecordBytes
		if size == 0 {
			size = 1024
		}
		opts = append(opts, kfake.SyntheticFetch(kfake.SyntheticBatch{
			Records:     max(1, (1<<20)/(size+32)), // a batch fits a 1 MiB fetch
			RecordBytes: size,
			RandomFrac:  1,
		}))
	case Plain:
	default:
		return nil, badOption("Kind", cfg.Kind, fmt.Sprintf("must be %s, %s or %s", Blackhole, Synthetic, Plain))
	}
	if cfg.TLS != nil {
		opts = append(opts, kfake.TLS(cfg.TLS))
	}
	for t, n := range cfg.Topics {
		opts = append(opts, kfake.SeedTopics(n, t))
	}
	var adv net.Addr
	if cfg.Advertise != "" {
		host, port, err := net.SplitHostPort(cfg.Advertise)
		p, perr := strconv.Atoi(port)
		if err != nil || perr != nil || net.ParseIP(host) == nil {
			return nil, badOption("Advertise", cfg.Advertise, "is not IP:PORT")
		}
		adv = &net.TCPAddr{IP: net.ParseIP(host), Port: p}
	}
	opts = append(opts, kfake.ListenFn(func(network, address string) (net.Listener, error) {
		ln, err := net.Listen(network, address)
		if err != nil {
			return nil, err
		}
		b.addrs = append(b.addrs, ln.Addr().String())
		if adv != nil {
			return advertisedListener{Listener: ln, addr: adv}, nil
		}
		return ln, nil
	}))
	c, err := kfake.NewCluster(opts...)
	if err != nil {
		return nil, err
	}
	b.Cluster = c
	for t, parts := range cfg.Topics {
		for p := int32(0); p < parts && n > 1; p++ {
			if err := c.MoveTopicPartition(t, p, p%int32(n)); err != nil {
				c.Close()
				return nil, fmt.Errorf("bench: leading %s/%d from broker %d: %w", t, p, p%int32(n), err)
			}
		}
	}
	return b, nil
}

// newMisbehaving starts a Plain broker behind the backend cfg.Misbehave
// names.
func newMisbehaving(cfg BrokerConfig) (*Broker, error) {
	switch {
	case cfg.Kind != "" && cfg.Kind != Plain:
		return nil, &OptionError{Field: "Misbehave", Value: string(cfg.Misbehave), Reason: "stores records, as the check reads them back: give %s plain or leave it out", Other: "Kind"}
	case cfg.Brokers > 1:
		return nil, &OptionError{Field: "Misbehave", Value: string(cfg.Misbehave), Reason: "runs one broker: leave %s out", Other: "Brokers"}
	case cfg.Advertise != "":
		return nil, &OptionError{Field: "Misbehave", Value: string(cfg.Misbehave), Reason: "advertises its own address: leave %s out", Other: "Advertise"}
	case cfg.TLS != nil:
		return nil, &OptionError{Field: "Misbehave", Value: string(cfg.Misbehave), Reason: "speaks plaintext: leave %s out", Other: "TLS"}
	}
	listen := net.JoinHostPort("127.0.0.1", strconv.Itoa(cfg.Port))
	var opts []kfake.Opt
	for t, n := range cfg.Topics {
		opts = append(opts, kfake.SeedTopics(n, t))
	}
	switch cfg.Misbehave {
	case Reorder:
		r, err := hostile.NewReorderer(hostile.ReordererConfig{Listen: listen, KfakeOpts: opts})
		if err != nil {
			return nil, err
		}
		return &Broker{Cluster: r.Cluster(), addrs: []string{r.Addr()}, closeBackend: func() { r.Close() }, misbehaved: r.Reordered}, nil
	case Swap:
		s, err := hostile.NewSwapper(hostile.SwapperConfig{Listen: listen, KfakeOpts: opts})
		if err != nil {
			return nil, err
		}
		return &Broker{Cluster: s.Cluster(), addrs: []string{s.Addr()}, closeBackend: func() { s.Close() }, misbehaved: s.Swapped}, nil
	}
	return nil, badOption("Misbehave", cfg.Misbehave, fmt.Sprintf("must be %s or %s", Reorder, Swap))
}

// Addr is where the broker really listens, whatever it advertises: with
// several brokers, every one's address, comma separated.
func (b *Broker) Addr() string { return strings.Join(b.addrs, ",") }

// Misbehaved returns how many responses a misbehaving broker has written
// before the response to a request sent earlier on the same connection;
// zero for a broker that keeps the order.
func (b *Broker) Misbehaved() int64 {
	if b.misbehaved == nil {
		return 0
	}
	return b.misbehaved()
}

// Close stops the broker.
func (b *Broker) Close() {
	if b.closeBackend != nil {
		b.closeBackend()
		return
	}
	b.Cluster.Close()
}

// RelayedBroker is a broker that advertises the relay in front of it, so that
// every connection a client makes goes through the relay.
type RelayedBroker struct {
	*Broker
	Relay *Relay
	done  chan struct{}
}

// NewRelayedBroker starts a broker and a relay in front of it listening on
// relayListen ("127.0.0.1:0" for any free port).
func NewRelayedBroker(cfg BrokerConfig, relayListen string) (*RelayedBroker, error) {
	ln, err := net.Listen("tcp", relayListen)
	if err != nil {
		return nil, err
	}
	cfg.Advertise = ln.Addr().String()
	b, err := NewBroker(cfg)
	if err != nil {
		ln.Close()
		return nil, err
	}
	r := newRelayOn(ln, b.Addr())
	rb := &RelayedBroker{Broker: b, Relay: r, done: make(chan struct{})}
	go func() {
		defer close(rb.done)
		_ = r.Serve()
	}()
	return rb, nil
}

// Addr is the relay's address, the only one clients should be given.
func (rb *RelayedBroker) Addr() string { return rb.Relay.Addr() }

// Close stops the relay, then the broker.
func (rb *RelayedBroker) Close() {
	rb.Relay.Close()
	<-rb.done
	rb.Broker.Close()
}
