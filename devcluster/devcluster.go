// Package devcluster runs the embedded Kafka-compatible backend of
// `inorder dev`: a franz-go kfake cluster whose data lives in a directory,
// so a restart keeps the records, bounded by a retention limit, and the API
// versions it serves, which the proxy uses to forward nothing the fake
// would fail on. It behaves like an Apache Kafka broker with its defaults
// where clients notice: topics are created on first use, whatever the
// Metadata version, with the same partition count for every client.
package devcluster

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Options configure the embedded cluster. The zero value runs three
// in-memory brokers.
type Options struct {
	// Brokers is the number of brokers; zero means 3.
	Brokers int
	// DataDir keeps the cluster's state across restarts; empty keeps it in
	// memory only. The caller holds it with Lock while the cluster runs.
	DataDir string
	// Partitions is the partition count of a topic created on first use
	// or by a CreateTopics request that leaves it to the broker, as Kafka's
	// num.partitions. Zero means 1, Kafka's default.
	Partitions int
	// RetentionBytes bounds each partition's data, as Kafka's
	// log.retention.bytes: past it the oldest records are deleted. Zero
	// means no bound.
	RetentionBytes int64
	// RetentionTime deletes records older than it, as Kafka's
	// log.retention.ms. Zero means no bound.
	RetentionTime time.Duration
	// Ports are the brokers' ports on 127.0.0.1, one per broker in node id
	// order, so that their addresses are the same at every start. Nil
	// picks free ports.
	Ports []int
	// Extra options passed to kfake after ours.
	Extra []kfake.Opt
}

// ErrNotDataDir is returned by DirLock.Reset for a directory that holds
// something other than an embedded cluster's data.
var ErrNotDataDir = errors.New("not an embedded cluster's data directory")

// ErrCount is returned by Start for a negative broker or partition count,
// or ports that are not one per broker.
var ErrCount = errors.New("embedded cluster: counts must not be negative")

// PortError is returned by Start for a broker whose port could not be
// listened on; errors.Is sees the system's reason (syscall.EADDRINUSE).
type PortError struct {
	Node int    // the broker's node id
	Addr string // where it was to listen
	Err  error
}

func (e *PortError) Error() string {
	return fmt.Sprintf("embedded broker %d at %s: %v", e.Node, e.Addr, e.Err)
}

func (e *PortError) Unwrap() error { return e.Err }

// Cluster is a running embedded backend.
type Cluster struct {
	*kfake.Cluster
	versions map[int16]int16
	stop     chan struct{} // closed by Close; ends the retention loop
	done     chan struct{} // closed when the retention loop returns
	closed   sync.Once
}

// retentionInterval is how often retention runs, as Kafka's
// log.retention.check.interval.ms (whose default is 5 minutes); shorter,
// since a development machine is where a quick benchmark fills the disk.
const retentionInterval = time.Minute

// segmentBytes is the size at which a partition's data file rolls.
// Retention deletes whole files, so a partition holds at most its bound
// plus one file; kfake's default (100MiB) would make that slack large.
const segmentBytes = 16 << 20

// Start starts the cluster and learns the versions it serves.
func Start(ctx context.Context, o Options) (*Cluster, error) {
	if o.Brokers < 0 || o.Partitions < 0 {
		return nil, fmt.Errorf("%w: %d brokers, %d partitions", ErrCount, o.Brokers, o.Partitions)
	}
	n := o.Brokers
	if n == 0 {
		n = 3
	}
	parts := o.Partitions
	if parts == 0 {
		parts = 1
	}
	bcfg := map[string]string{"log.segment.bytes": strconv.Itoa(segmentBytes)}
	if o.RetentionBytes > 0 {
		bcfg["log.retention.bytes"] = strconv.FormatInt(o.RetentionBytes, 10)
	}
	if o.RetentionTime > 0 {
		bcfg["log.retention.ms"] = strconv.FormatInt(o.RetentionTime.Milliseconds(), 10)
	} else {
		bcfg["log.retention.ms"] = "-1" // kfake's own default is Kafka's 7 days
	}
	opts := []kfake.Opt{
		kfake.NumBrokers(n),
		kfake.AllowAutoTopicCreation(),
		kfake.DefaultNumPartitions(parts),
		kfake.BrokerConfigs(bcfg),
	}
	if o.DataDir != "" {
		opts = append(opts, kfake.DataDir(o.DataDir))
	}
	if o.Ports != nil {
		if len(o.Ports) != n {
			return nil, fmt.Errorf("%w: %d ports for %d brokers", ErrCount, len(o.Ports), n)
		}
		// kfake opens the brokers' listeners in node id order.
		node := 0
		opts = append(opts, kfake.Ports(o.Ports...), kfake.ListenFn(func(network, addr string) (net.Listener, error) {
			ln, err := net.Listen(network, addr)
			if err != nil {
				return nil, &PortError{Node: node, Addr: addr, Err: err}
			}
			node++
			return ln, nil
		}))
	}
	opts = append(opts, o.Extra...)
	kc, err := kfake.NewCluster(opts...)
	if err != nil {
		return nil, fmt.Errorf("embedded cluster: %w", err)
	}
	installHooks(kc)
	c := &Cluster{Cluster: kc, stop: make(chan struct{}), done: make(chan struct{})}
	if o.RetentionBytes > 0 || o.RetentionTime > 0 {
		// Data kept from an earlier run is trimmed before clients come.
		kc.ApplyRetention()
		go c.retain()
	} else {
		close(c.done)
	}
	c.versions, err = servedVersions(ctx, kc.ListenAddrs())
	if err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

// Close stops the cluster, writing its state to the data directory.
func (c *Cluster) Close() {
	c.closed.Do(func() {
		close(c.stop)
		<-c.done
		c.Cluster.Close()
	})
}

// retain applies retention every retentionInterval until Close. kfake
// applies broker-level retention only when asked, or for topics with
// retention configs of their own.
func (c *Cluster) retain() {
	defer close(c.done)
	t := time.NewTicker(retentionInterval)
	defer t.Stop()
	for {
		select {
		case <-c.stop:
			return
		case <-t.C:
			c.ApplyRetention()
		}
	}
}

// Versions reports the highest version of key the cluster serves.
func (c *Cluster) Versions(key int16) (int16, bool) {
	v, ok := c.versions[key]
	return v, ok
}

func servedVersions(ctx context.Context, seeds []string) (map[int16]int16, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...))
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	resp, err := kmsg.NewPtrApiVersionsRequest().RequestWith(ctx, cl)
	if err != nil {
		return nil, fmt.Errorf("embedded cluster versions: %w", err)
	}
	out := make(map[int16]int16, len(resp.ApiKeys))
	for _, k := range resp.ApiKeys {
		out[k.ApiKey] = k.MaxVersion
	}
	return out, nil
}

// Fixup patches kfake's answers where they differ from Kafka's in a way
// that breaks a mainstream client. It implements proxy.Fixup.
type Fixup struct{}

// Needs reports the responses Fix patches: CreateTopics v5+, whose
// per-topic Configs kfake leaves null when a topic has no explicit configs;
// Kafka always sends a list and the Java admin client dereferences it.
func (Fixup) Needs(key, version int16) bool {
	return key == 19 && version >= 5
}

// Fix replaces null config lists of created topics with empty ones.
func (Fixup) Fix(resp kmsg.Response) bool {
	r, ok := resp.(*kmsg.CreateTopicsResponse)
	if !ok {
		return false
	}
	changed := false
	for i := range r.Topics {
		t := &r.Topics[i]
		if t.ErrorCode == 0 && t.Configs == nil {
			t.Configs = []kmsg.CreateTopicsResponseTopicConfig{}
			changed = true
		}
	}
	return changed
}
