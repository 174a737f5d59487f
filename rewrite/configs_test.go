package rewrite

import (
	"fmt"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// configAddresser advertises nodes as fakeMapper maps them, except those
// in unserved, and knows the upstream addresses in known.
type configAddresser struct {
	unserved map[int32]bool
	known    map[string]bool
}

func (c configAddresser) Advertised(id int32) (string, int32, bool) {
	if c.unserved[id] {
		return "", 0, false
	}
	return proxyHost(id), proxyPort(id), true
}

func (c configAddresser) Upstream(host string, port int32) bool {
	return c.known[fmt.Sprintf("%s:%d", host, port)]
}

// addressedMapper is a Mapper that is also an Addresser, as the proxy's is.
type addressedMapper struct {
	*fakeMapper
	configAddresser
}

func config(name, value string, synonyms ...string) kmsg.DescribeConfigsResponseResourceConfig {
	c := kmsg.NewDescribeConfigsResponseResourceConfig()
	c.Name, c.Value = name, kmsg.StringPtr(value)
	for _, s := range synonyms {
		syn := kmsg.NewDescribeConfigsResponseResourceConfigConfigSynonym()
		syn.Name, syn.Value = name, kmsg.StringPtr(s)
		c.ConfigSynonyms = append(c.ConfigSynonyms, syn)
	}
	return c
}

func upstreamAddr(id int32) string { return fmt.Sprintf("%s:%d", upstreamHost(id), upstreamPort(id)) }

// brokerConfigs is the DescribeConfigs answer of a KRaft node running both
// roles, as Apache Kafka's describes broker id: its listeners, its
// controller listener, the quorum, and values that name other servers.
func brokerConfigs(id int32, version int16) *kmsg.DescribeConfigsResponse {
	r := kmsg.NewPtrDescribeConfigsResponse()
	r.SetVersion(version)
	res := kmsg.NewDescribeConfigsResponseResource()
	res.ResourceType, res.ResourceName = configResourceBroker, fmt.Sprint(id)
	ctl := fmt.Sprintf("%s:%d", upstreamHost(id), 19093)
	res.Configs = []kmsg.DescribeConfigsResponseResourceConfig{
		config("advertised.listeners", "PLAINTEXT://"+upstreamAddr(id)+",SSL://"+upstreamHost(id)+":9443,CTL://"+ctl, "PLAINTEXT://"+upstreamAddr(id)),
		config("listeners", "PLAINTEXT://:9092,SSL://0.0.0.0:9443,CTL://"+ctl),
		config("controller.listener.names", "CTL"),
		config("controller.quorum.voters", "1@"+ctl+",2@"+upstreamHost(2)+":19093"),
		config("controller.quorum.bootstrap.servers", ctl),
		config("confluent.metrics.reporter.bootstrap.servers", "metrics.test:9092"),
		config("zookeeper.connect", "zk.test:2181/kafka"),
		config("advertised.host.name", upstreamHost(id)),
		config("advertised.port", fmt.Sprint(upstreamPort(id))),
		config("some.endpoint", "https://"+upstreamAddr(2)+"/x", "https://"+upstreamAddr(2)),
		config("some.known", "mirror;"+upstreamHost(2)+":19093"),
		config("listener.security.protocol.map", "PLAINTEXT:PLAINTEXT,SSL:SSL,CTL:PLAINTEXT"),
		config("log.dirs", "/var/lib/kafka"),
	}
	empty := kmsg.NewDescribeConfigsResponseResourceConfig()
	empty.Name = "controller.quorum.bootstrap.servers.unset"
	res.Configs = append(res.Configs, empty)
	r.Resources = append(r.Resources, res)
	return r
}

func configValue(t *testing.T, res kmsg.DescribeConfigsResponseResource, name string) (*string, []*string, bool) {
	t.Helper()
	for _, c := range res.Configs {
		if c.Name == name {
			var syns []*string
			for _, s := range c.ConfigSynonyms {
				syns = append(syns, s.Value)
			}
			return c.Value, syns, c.IsSensitive
		}
	}
	t.Fatalf("no config %s", name)
	return nil, nil, false
}

// TestDescribeConfigsRewritesBrokerAddresses: through Response, at every
// version, a broker's listeners name the proxy's address for it with
// their names kept and its controller listener dropped; the quorum and
// every other server is redacted; values naming an upstream address the
// proxy knows (some.endpoint) or the response names (some.known, a
// voter's) are redacted; nothing else changes.
func TestDescribeConfigsRewritesBrokerAddresses(t *testing.T) {
	a := addressedMapper{newFakeMapper(), configAddresser{known: map[string]bool{upstreamAddr(2): true}}}
	for v := int16(0); v <= kmsg.NewPtrDescribeConfigsResponse().MaxVersion(); v++ {
		resp, err := roundtrip(brokerConfigs(1, v))
		if err != nil {
			t.Fatal(err)
		}
		if !Needs(resp.Key(), v) {
			t.Fatalf("Needs(32, %d) = false", v)
		}
		if err := Response(resp, a); err != nil {
			t.Fatal(err)
		}
		if a.calls != 0 {
			t.Fatalf("v%d: the Mapper was asked %d times; config values must not map (and so move) nodes", v, a.calls)
		}
		out, err := roundtrip(resp)
		if err != nil {
			t.Fatal(err)
		}
		res := out.(*kmsg.DescribeConfigsResponse).Resources[0]
		me := fmt.Sprintf("%s:%d", proxyHost(1), proxyPort(1))
		for _, w := range []struct {
			name, value string
			synonyms    []string
		}{
			{"advertised.listeners", "PLAINTEXT://" + me + ",SSL://" + me, []string{"PLAINTEXT://" + me}},
			{"listeners", "PLAINTEXT://" + me + ",SSL://" + me, nil},
			{"advertised.host.name", proxyHost(1), nil},
			{"advertised.port", fmt.Sprint(proxyPort(1)), nil},
			{"controller.listener.names", "CTL", nil},
			{"listener.security.protocol.map", "PLAINTEXT:PLAINTEXT,SSL:SSL,CTL:PLAINTEXT", nil},
			{"log.dirs", "/var/lib/kafka", nil},
		} {
			val, syns, sensitive := configValue(t, res, w.name)
			if val == nil || *val != w.value || sensitive {
				t.Errorf("v%d: %s = %v (sensitive %v), want %q", v, w.name, deref(val), sensitive, w.value)
			}
			if v >= 1 {
				for i, s := range syns {
					if s == nil || *s != w.synonyms[i] {
						t.Errorf("v%d: %s synonym %d = %v, want %q", v, w.name, i, deref(s), w.synonyms[i])
					}
				}
			}
		}
		for _, name := range []string{"controller.quorum.voters", "controller.quorum.bootstrap.servers",
			"confluent.metrics.reporter.bootstrap.servers", "zookeeper.connect", "some.endpoint", "some.known"} {
			val, syns, sensitive := configValue(t, res, name)
			if val != nil || !sensitive {
				t.Errorf("v%d: %s = %v (sensitive %v), want it redacted", v, name, deref(val), sensitive)
			}
			for i, s := range syns {
				if s != nil {
					t.Errorf("v%d: %s synonym %d = %q, want it redacted", v, name, i, *s)
				}
			}
		}
		if val, _, sensitive := configValue(t, res, "controller.quorum.bootstrap.servers.unset"); val != nil || sensitive {
			t.Errorf("v%d: an unset value became %v (sensitive %v)", v, deref(val), sensitive)
		}
		if b := out.AppendTo(nil); strings.Contains(string(b), "upstream.test") {
			t.Errorf("v%d: the rewritten response still names an upstream: %q", v, b)
		}
	}
}

func deref(s *string) any {
	if s == nil {
		return nil
	}
	return *s
}

// TestDescribeConfigsRedactsUnservedListeners: a broker the proxy
// advertises no address for, a resource naming no broker, and a Mapper
// that cannot tell (not an Addresser) all leave listener values redacted.
func TestDescribeConfigsRedactsUnservedListeners(t *testing.T) {
	unserved := brokerConfigs(1, 4)
	DescribeConfigs(unserved, configAddresser{unserved: map[int32]bool{1: true}})
	defaults := brokerConfigs(1, 4)
	defaults.Resources[0].ResourceName = ""
	DescribeConfigs(defaults, configAddresser{})
	plain := brokerConfigs(1, 4)
	if err := Response(plain, newFakeMapper()); err != nil {
		t.Fatal(err)
	}
	for i, r := range []*kmsg.DescribeConfigsResponse{unserved, defaults, plain} {
		for _, name := range []string{"advertised.listeners", "listeners", "advertised.host.name", "advertised.port"} {
			if val, _, sensitive := configValue(t, r.Resources[0], name); val != nil || !sensitive {
				t.Errorf("case %d: %s = %v (sensitive %v), want it redacted", i, name, deref(val), sensitive)
			}
		}
	}
}

// TestDescribeConfigsControllerListenerByDefault: without
// controller.listener.names in the answer, a listener called CONTROLLER
// is the controller's and is dropped.
func TestDescribeConfigsControllerListenerByDefault(t *testing.T) {
	r := kmsg.NewPtrDescribeConfigsResponse()
	res := kmsg.NewDescribeConfigsResponseResource()
	res.ResourceType, res.ResourceName = configResourceBroker, "2"
	res.Configs = append(res.Configs, config("advertised.listeners", "CONTROLLER://"+upstreamHost(2)+":9093,PLAINTEXT://"+upstreamAddr(2)))
	r.Resources = append(r.Resources, res)
	DescribeConfigs(r, configAddresser{})
	want := fmt.Sprintf("PLAINTEXT://%s:%d", proxyHost(2), proxyPort(2))
	if v := r.Resources[0].Configs[0].Value; v == nil || *v != want {
		t.Fatalf("advertised.listeners = %v, want %s", deref(v), want)
	}
}

// TestDescribeConfigsLeavesOtherResources: topic and broker logger
// resources carry no addresses and come out as they went in.
func TestDescribeConfigsLeavesOtherResources(t *testing.T) {
	r := kmsg.NewPtrDescribeConfigsResponse()
	r.SetVersion(4)
	for _, typ := range []kmsg.ConfigResourceType{kmsg.ConfigResourceTypeTopic, kmsg.ConfigResourceTypeBrokerLogger} {
		res := kmsg.NewDescribeConfigsResponseResource()
		res.ResourceType, res.ResourceName = typ, "1"
		res.Configs = append(res.Configs, config("cleanup.policy", "delete"), config("kafka.server.KafkaApis", "INFO"))
		r.Resources = append(r.Resources, res)
	}
	before := string(r.AppendTo(nil))
	if err := Response(r, addressedMapper{newFakeMapper(), configAddresser{}}); err != nil {
		t.Fatal(err)
	}
	if after := string(r.AppendTo(nil)); after != before {
		t.Fatalf("resources without addresses changed:\n%q\n%q", before, after)
	}
}
