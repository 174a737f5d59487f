package rewrite

import (
	"net"
	"strconv"
	"strings"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// Addresser is what DescribeConfigs rewriting asks of the proxy. Unlike
// Mapper it opens nothing and moves no node: a config value is what a
// broker was told to advertise, not where it is reached, so it must not
// redirect the proxy's connections.
type Addresser interface {
	// Advertised returns the address the proxy advertises for broker
	// nodeID, and false when it advertises none (a node it has not
	// mapped, or will not serve).
	Advertised(nodeID int32) (host string, port int32, ok bool)
	// Upstream reports whether host:port is the address of an upstream
	// broker or controller the proxy knows.
	Upstream(host string, port int32) bool
}

// Config resource types (DescribeConfigs ResourceType).
const configResourceBroker = 4

// Broker config keys whose values name the broker's own listeners, as a
// comma-separated list of NAME://host:port.
var listenerKeys = map[string]bool{
	"advertised.listeners": true,
	"listeners":            true,
}

// Broker config keys of brokers before Kafka 3.0 naming the broker's own
// host, or its port, alone.
var (
	hostKeys = map[string]bool{"advertised.host.name": true, "host.name": true}
	portKeys = map[string]bool{"advertised.port": true, "port": true}
)

// redactKeys are config keys whose values name other servers: the KRaft
// quorum, ZooKeeper, or a cluster to bootstrap from. None is reachable
// through the proxy (the quorum on purpose: see Mapper.MapController), so
// their values are redacted whatever they hold.
var redactKeys = map[string]bool{
	"controller.quorum.voters":            true,
	"controller.quorum.bootstrap.servers": true,
	"zookeeper.connect":                   true,
}

// controllerListenerNames is the config naming a KRaft node's controller
// listeners, and the name Kafka's own examples give them when the response
// does not carry it.
const (
	controllerListenerNames   = "controller.listener.names"
	defaultControllerListener = "CONTROLLER"
)

// DescribeConfigs rewrites the broker and controller addresses that config
// values carry, which Apache Kafka returns verbatim for a broker resource:
//
//   - advertised.listeners and listeners of broker N name, for each of its
//     broker listeners, the proxy's address for N (listener names kept);
//     its controller listeners (those of controller.listener.names, else
//     one named CONTROLLER) are dropped. host.name, advertised.host.name,
//     port and advertised.port become the proxy's host and port for N.
//     When the proxy advertises no address for N (or the resource names no
//     broker), they are redacted;
//   - controller.quorum.voters, controller.quorum.bootstrap.servers,
//     zookeeper.connect and every key ending in bootstrap.servers are
//     redacted;
//   - any other value holding an upstream address (one a listener or voter
//     value of the response names, or one a knows) is redacted.
//
// Redacted means what Kafka sends for a password: a null value marked
// sensitive, so tools print it as hidden rather than unset. Synonyms are
// treated like the entries they stand for. With a nil a every listener
// value is redacted.
func DescribeConfigs(r *kmsg.DescribeConfigsResponse, a Addresser) {
	seen := make(map[string]bool)
	for i := range r.Resources {
		for j := range r.Resources[i].Configs {
			c := &r.Resources[i].Configs[j]
			noteAddresses(seen, c.Name, c.Value)
			for k := range c.ConfigSynonyms {
				s := &c.ConfigSynonyms[k]
				noteAddresses(seen, s.Name, s.Value)
			}
		}
	}
	upstream := func(host, port string) bool {
		if seen[strings.ToLower(net.JoinHostPort(host, port))] {
			return true
		}
		p, err := strconv.ParseInt(port, 10, 32)
		return err == nil && a != nil && a.Upstream(host, int32(p))
	}
	for i := range r.Resources {
		res := &r.Resources[i]
		cv := configValues{upstream: upstream, controllers: controllerListeners(res)}
		if res.ResourceType == configResourceBroker && a != nil {
			if id, err := strconv.ParseInt(res.ResourceName, 10, 32); err == nil {
				cv.host, cv.port, cv.ok = a.Advertised(int32(id))
			}
		}
		for j := range res.Configs {
			c := &res.Configs[j]
			if cv.rewrite(c.Name, &c.Value) {
				c.IsSensitive = true
			}
			for k := range c.ConfigSynonyms {
				s := &c.ConfigSynonyms[k]
				cv.rewrite(s.Name, &s.Value)
			}
		}
	}
}

// configValues rewrites the values of one resource.
type configValues struct {
	host        string // the proxy's address for the resource's broker
	port        int32
	ok          bool // host and port are set
	controllers map[string]bool
	upstream    func(host, port string) bool
}

// rewrite rewrites the value of config key, and reports whether it
// redacted it.
func (cv *configValues) rewrite(key string, value **string) bool {
	if *value == nil || **value == "" {
		return false
	}
	v := **value
	var out string
	switch {
	case redactKeys[key] || strings.HasSuffix(key, "bootstrap.servers"):
		*value = nil
		return true
	case listenerKeys[key]:
		var b strings.Builder
		for l := range strings.SplitSeq(v, ",") {
			name, _, found := strings.Cut(strings.TrimSpace(l), "://")
			if !found || cv.controllers[strings.ToUpper(name)] {
				continue
			}
			if b.Len() > 0 {
				b.WriteByte(',')
			}
			b.WriteString(name + "://" + net.JoinHostPort(cv.host, strconv.Itoa(int(cv.port))))
		}
		out = b.String()
	case hostKeys[key]:
		out = cv.host
	case portKeys[key]:
		out = strconv.Itoa(int(cv.port))
	default:
		if !namesUpstream(v, cv.upstream) {
			return false
		}
		*value = nil
		return true
	}
	if !cv.ok || out == "" {
		*value = nil
		return true
	}
	*value = &out
	return false
}

// controllerListeners returns the names of the resource's controller
// listeners, upper-cased as Kafka compares them.
func controllerListeners(res *kmsg.DescribeConfigsResponseResource) map[string]bool {
	for _, c := range res.Configs {
		if c.Name == controllerListenerNames && c.Value != nil && *c.Value != "" {
			names := make(map[string]bool)
			for n := range strings.SplitSeq(*c.Value, ",") {
				names[strings.ToUpper(strings.TrimSpace(n))] = true
			}
			return names
		}
	}
	return map[string]bool{defaultControllerListener: true}
}

// noteAddresses adds to seen the host:port addresses a listener or voter
// value names; an address bound to every interface (an empty host) names
// nothing another value could repeat.
func noteAddresses(seen map[string]bool, key string, value *string) {
	if value == nil || (!listenerKeys[key] && !redactKeys[key] && !strings.HasSuffix(key, "bootstrap.servers")) {
		return
	}
	eachAddress(*value, func(host, port string) bool {
		if host != "" {
			seen[strings.ToLower(net.JoinHostPort(host, port))] = true
		}
		return false
	})
}

// namesUpstream reports whether value holds an address upstream knows.
func namesUpstream(value string, upstream func(host, port string) bool) bool {
	return eachAddress(value, func(host, port string) bool { return host != "" && upstream(host, port) })
}

// eachAddress calls fn with every host:port of value, a list separated by
// commas, semicolons or spaces whose items may carry a scheme
// (NAME://host:port), a node id (id@host:port) and a path, until fn
// returns true; it reports whether one did.
func eachAddress(value string, fn func(host, port string) bool) bool {
	for _, item := range strings.FieldsFunc(value, func(r rune) bool {
		return r == ',' || r == ';' || r == ' ' || r == '\t' || r == '\n' || r == '\r'
	}) {
		if _, rest, ok := strings.Cut(item, "://"); ok {
			item = rest
		}
		if i := strings.LastIndexByte(item, '@'); i >= 0 {
			item = item[i+1:]
		}
		if i := strings.IndexByte(item, '/'); i >= 0 {
			item = item[:i]
		}
		host, port, err := net.SplitHostPort(item)
		if err != nil {
			continue
		}
		if _, err := strconv.ParseUint(port, 10, 16); err != nil {
			continue
		}
		if fn(host, port) {
			return true
		}
	}
	return false
}
