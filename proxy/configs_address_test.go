package proxy_test

import (
	"net"
	"strconv"
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

// TestPortsDescribeConfigsHidesAddresses: a client describing each broker
// through the port-per-broker proxy with franz-go's admin client (which
// sends each broker's resource to that broker, through the proxy) reads
// each broker's listeners at its proxy listener, the quorum redacted, and
// never dials around the proxy. Both ordering modes.
func TestPortsDescribeConfigsHidesAddresses(t *testing.T) {
	for _, mode := range []config.Ordering{config.OrderingNone, config.OrderingConnection} {
		t.Run(string(mode), func(t *testing.T) {
			kc := newCluster(t)
			answerBrokerConfigs(kc)
			p := startProxy(t, mode, kc.ListenAddrs(), nil)
			ctx := testContext(t, 30*time.Second)
			var rec dialRecorder
			cl, err := kgo.NewClient(kgo.SeedBrokers(p.Addr()), rec.opt())
			if err != nil {
				t.Fatal(err)
			}
			defer cl.Close()
			adm := kadm.NewClient(cl)
			brokers, err := adm.ListBrokers(ctx)
			if err != nil || len(brokers) != 3 {
				t.Fatalf("brokers %v: %v", brokers, err)
			}
			at := map[int32]string{}
			for _, b := range brokers {
				at[b.NodeID] = net.JoinHostPort(b.Host, strconv.Itoa(int(b.Port)))
			}
			rcs, err := adm.DescribeBrokerConfigs(ctx, brokers.NodeIDs()...)
			if err != nil {
				t.Fatal(err)
			}
			if len(rcs) != 3 {
				t.Fatalf("described %d brokers, want 3", len(rcs))
			}
			for _, rc := range rcs {
				if rc.Err != nil {
					t.Fatalf("broker %s: %v", rc.Name, rc.Err)
				}
				id, _ := strconv.Atoi(rc.Name)
				var configs []kmsg.DescribeConfigsResponseResourceConfig
				for _, c := range rc.Configs {
					configs = append(configs, kmsg.DescribeConfigsResponseResourceConfig{Name: c.Key, Value: c.Value})
				}
				checkBrokerConfigs(t, int32(id), configs, at[int32(id)])
			}
			upstream := map[string]bool{}
			for _, a := range kc.ListenAddrs() {
				upstream[a] = true
			}
			rec.mu.Lock()
			defer rec.mu.Unlock()
			for a := range rec.addrs {
				if upstream[a] {
					t.Fatalf("the client dialled the upstream %s", a)
				}
			}
		})
	}
}
