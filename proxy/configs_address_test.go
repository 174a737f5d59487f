package proxy_test

import (
	"context"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/inorder-proxy/inorder/config"
)

// answerBrokerConfigs makes kc answer a DescribeConfigs of brokers as
// Apache Kafka does (kfake has no listener configs): each broker's
// listeners name its own address, its quorum the port above it
// (brokerAddressConfigs). Requests naming other resources are kfake's.
func answerBrokerConfigs(kc *kfake.Cluster) {
	addrs := kc.ListenAddrs() // not from inside the control function: it would wait on itself
	kc.ControlKey(int16(kmsg.DescribeConfigs), func(req kmsg.Request) (kmsg.Response, error, bool) {
		kc.KeepControl()
		r := req.(*kmsg.DescribeConfigsRequest)
		resp := r.ResponseKind().(*kmsg.DescribeConfigsResponse)
		for _, rr := range r.Resources {
			id, err := strconv.Atoi(rr.ResourceName)
			if rr.ResourceType != kmsg.ConfigResourceTypeBroker || err != nil || id < 0 || id >= len(addrs) {
				return nil, nil, false
			}
			host, port, _ := net.SplitHostPort(addrs[id])
			p, _ := strconv.Atoi(port)
			res := kmsg.NewDescribeConfigsResponseResource()
			res.ResourceType, res.ResourceName = rr.ResourceType, rr.ResourceName
			res.Configs = brokerAddressConfigs(rr.ResourceName, host, int32(p))
			resp.Resources = append(resp.Resources, res)
		}
		return resp, nil, true
	})
}

// checkBrokerConfigs checks the configs of broker id as a client got them:
// its listeners name want (the proxy's address for it) and nothing names
// another server.
func checkBrokerConfigs(t *testing.T, id int32, configs []kmsg.DescribeConfigsResponseResourceConfig, want string) {
	t.Helper()
	got := map[string]*string{}
	for _, c := range configs {
		got[c.Name] = c.Value
		for _, e := range configEndpoints(id, c.Name, c.Value) {
			if e.other {
				t.Errorf("broker %d: %s names %s:%d", id, c.Name, e.host, e.port)
			}
		}
	}
	for _, name := range []string{"advertised.listeners", "listeners"} {
		if v := got[name]; v == nil || *v != "PLAINTEXT://"+want {
			t.Errorf("broker %d: %s = %v, want PLAINTEXT://%s", id, name, strPtr(v), want)
		}
	}
	for _, name := range []string{"controller.quorum.voters", "controller.quorum.bootstrap.servers", "metric.reporter.endpoint"} {
		if v, ok := got[name]; !ok || v != nil {
			t.Errorf("broker %d: %s = %v, want it redacted", id, name, strPtr(v))
		}
	}
}

func strPtr(s *string) string {
	if s == nil {
		return "<null>"
	}
	return strconv.Quote(*s)
}

// TestDescribeConfigsHidesAddresses describes every broker through each
// topology, in both ordering modes, in front of kfake answering as Apache
// Kafka does (answerBrokerConfigs); see describeConfigsThrough.
func TestDescribeConfigsHidesAddresses(t *testing.T) {
	for _, topo := range []config.Topology{config.TopologyPorts, config.TopologySNI, config.TopologySingle} {
		for _, mode := range []config.Ordering{config.OrderingNone, config.OrderingConnection} {
			t.Run(string(topo)+"/"+string(mode), func(t *testing.T) {
				kc := newCluster(t)
				answerBrokerConfigs(kc)
				describeConfigsThrough(t, topo, mode, kc.ListenAddrs())
			})
		}
	}
}

// TestApacheKafkaDescribeConfigs is TestDescribeConfigsHidesAddresses in
// front of Apache Kafka (testenv/kafka, INORDER_KAFKA_BOOTSTRAP), whose
// brokers name their listeners and the KRaft quorum in their configs.
func TestApacheKafkaDescribeConfigs(t *testing.T) {
	boot := os.Getenv("INORDER_KAFKA_BOOTSTRAP")
	if boot == "" {
		t.Skip("no Apache Kafka: run testenv/kafka/start.sh single and set INORDER_KAFKA_BOOTSTRAP to what it prints")
	}
	for _, topo := range []config.Topology{config.TopologyPorts, config.TopologySNI, config.TopologySingle} {
		t.Run(string(topo), func(t *testing.T) {
			describeConfigsThrough(t, topo, config.OrderingConnection, strings.Split(boot, ","))
		})
	}
}

// describeConfigsThrough describes every broker of the cluster at boot
// (all its configs, with synonyms) directly and through the proxy of
// topology topo: through the proxy, each listener of a broker's
// advertised.listeners and listeners names the proxy's address for that
// broker (its listener, its name on the one port, the single endpoint),
// the quorum's values are redacted, and no value or synonym names an
// address the cluster's metadata or the direct answers' listener and
// quorum values name.
func describeConfigsThrough(t *testing.T, topo config.Topology, mode config.Ordering, boot []string) {
	ctx := testContext(t, 60*time.Second)
	direct, err := kgo.NewClient(kgo.SeedBrokers(boot...))
	if err != nil {
		t.Fatal(err)
	}
	defer direct.Close()
	upstreamBrokers, err := kadm.NewClient(direct).ListBrokers(ctx)
	if err != nil || len(upstreamBrokers) == 0 {
		t.Fatalf("brokers %v: %v", upstreamBrokers, err)
	}
	ids := upstreamBrokers.NodeIDs()
	upstream := map[string]bool{}
	for _, b := range upstreamBrokers {
		upstream[net.JoinHostPort(b.Host, strconv.Itoa(int(b.Port)))] = true
	}
	directConfigs, err := describeBrokers(ctx, direct, ids, -1)
	if err != nil {
		t.Fatal(err)
	}
	voters := false
	for _, configs := range directConfigs {
		for _, c := range configs {
			voters = voters || (c.Name == "controller.quorum.voters" && c.Value != nil && *c.Value != "")
			switch c.Name {
			case "advertised.listeners", "listeners", "controller.quorum.voters", "controller.quorum.bootstrap.servers":
			default:
				continue // names no server of the cluster
			}
			for _, v := range append([]*string{c.Value}, synonymValues(c)...) {
				for _, e := range configEndpoints(-1, "", v) {
					if e.host != "" {
						upstream[net.JoinHostPort(e.host, strconv.Itoa(int(e.port)))] = true
					}
				}
			}
		}
	}

	var opts []kgo.Opt
	want := map[int32]string{}
	switch topo {
	case config.TopologyPorts:
		p := startProxy(t, mode, boot, nil)
		var rec dialRecorder
		defer func() {
			for _, a := range rec.dialed() {
				if upstream[a] {
					t.Errorf("the client dialled the upstream %s", a)
				}
			}
		}()
		opts = []kgo.Opt{kgo.SeedBrokers(p.Addr()), rec.opt()}
	case config.TopologySNI:
		s := startSNIProxy(t, mode, boot, nil)
		opts = []kgo.Opt{kgo.SeedBrokers(s.Addr()), s.dialer(t)}
	case config.TopologySingle:
		p := startSingle(t, mode, boot, nil)
		only := &onlyProxy{addr: p.Addr()}
		defer only.check(t)
		opts = []kgo.Opt{kgo.SeedBrokers(p.Addr()), only.opt()}
		for _, id := range ids {
			want[id] = p.Addr()
		}
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if topo != config.TopologySingle {
		brokers, err := kadm.NewClient(cl).ListBrokers(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, b := range brokers {
			want[b.NodeID] = net.JoinHostPort(b.Host, strconv.Itoa(int(b.Port)))
		}
	}
	via := int32(-1)
	if topo == config.TopologySingle {
		via = 0 // the single endpoint's node id
	}
	got, err := describeBrokers(ctx, cl, ids, via)
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range ids {
		configs := got[id]
		if len(configs) == 0 {
			t.Fatalf("broker %d: no configs through the proxy", id)
		}
		listeners := 0
		for _, c := range configs {
			for _, v := range append([]*string{c.Value}, synonymValues(c)...) {
				for _, e := range configEndpoints(id, c.Name, v) {
					addr := net.JoinHostPort(e.host, strconv.Itoa(int(e.port)))
					switch {
					case upstream[addr]:
						t.Errorf("broker %d: %s names the upstream address %s through the proxy", id, c.Name, addr)
					case !e.other && addr != want[id]:
						t.Errorf("broker %d: %s names %s, not the proxy's %s", id, c.Name, addr, want[id])
					case !e.other:
						listeners++
					}
				}
			}
			if c.Name == "controller.quorum.voters" && voters && c.Value != nil {
				t.Errorf("broker %d: controller.quorum.voters = %q through the proxy, want it redacted", id, *c.Value)
			}
		}
		if listeners == 0 {
			t.Errorf("broker %d: no listener named through the proxy", id)
		}
	}
}

// describeBrokers asks for all the configs of each broker, with synonyms,
// one request per broker, sent to that broker (a broker answers its own
// static configs only), or with via >= 0 to broker via: the single
// endpoint, the one broker its clients know, routes each to its broker.
func describeBrokers(ctx context.Context, cl *kgo.Client, ids []int32, via int32) (map[int32][]kmsg.DescribeConfigsResponseResourceConfig, error) {
	out := map[int32][]kmsg.DescribeConfigsResponseResourceConfig{}
	for _, id := range ids {
		req := kmsg.NewPtrDescribeConfigsRequest()
		req.IncludeSynonyms = true
		rr := kmsg.NewDescribeConfigsRequestResource()
		rr.ResourceType, rr.ResourceName = kmsg.ConfigResourceTypeBroker, strconv.Itoa(int(id))
		req.Resources = []kmsg.DescribeConfigsRequestResource{rr}
		to := id
		if via >= 0 {
			to = via
		}
		resp, err := cl.Broker(int(to)).Request(ctx, req)
		if err != nil {
			return nil, fmt.Errorf("describing broker %d: %w", id, err)
		}
		r := resp.(*kmsg.DescribeConfigsResponse)
		if len(r.Resources) != 1 || r.Resources[0].ErrorCode != 0 {
			return nil, fmt.Errorf("describing broker %d: %+v", id, r.Resources)
		}
		out[id] = r.Resources[0].Configs
	}
	return out, nil
}

func synonymValues(c kmsg.DescribeConfigsResponseResourceConfig) []*string {
	var out []*string
	for _, s := range c.ConfigSynonyms {
		out = append(out, s.Value)
	}
	return out
}
