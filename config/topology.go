package config

import (
	"fmt"
	"strconv"

	"github.com/spf13/pflag"

	"github.com/inorder-proxy/inorder/sni"
)

// Topology is how clients reach the upstream's brokers through the proxy.
type Topology string

const (
	// TopologyPorts gives every broker a listener of its own, on
	// NodePortBase plus its node id.
	TopologyPorts Topology = "ports"
	// TopologySNI serves every broker on Listen's one TLS port: the server
	// name a client sends in its TLS handshake picks the broker
	// (SNIBootstrap, SNINodePattern, SNIControllerPattern).
	TopologySNI Topology = "sni"
	// TopologySingle presents the whole cluster as one broker at Listen's
	// address (AdvertisedHost and AdvertisedPort in every answer): the
	// proxy splits each request by partition leader or coordinator and
	// merges the answers, and no other listener opens.
	TopologySingle Topology = "single"
)

// Names returns the SNI names of c: the bootstrap name and the patterns,
// as Validate has checked them. It is the zero Names unless Topology is
// TopologySNI.
func (c *Config) Names() sni.Names {
	if c.Topology != TopologySNI {
		return sni.Names{}
	}
	node, _ := sni.ParsePattern(c.SNINodePattern)
	ctl, _ := sni.ParsePattern(c.SNIControllerPattern)
	return sni.Names{Bootstrap: sni.Normalize(c.SNIBootstrap), Node: node, Controller: ctl}
}

func bindTopologyFlags(fs *pflag.FlagSet, c *Config) {
	fs.Var((*topologyValue)(&c.Topology), "topology", "how clients reach each broker: ports (a listener per broker), sni (one TLS port, the broker picked by the TLS server name) or single (the whole cluster as one broker at the --listen address)")
	fs.StringVar(&c.SNIBootstrap, "sni-bootstrap", c.SNIBootstrap, "with --topology sni: the server name clients bootstrap from, e.g. bootstrap.kafka.example.com")
	fs.StringVar(&c.SNINodePattern, "sni-node-pattern", c.SNINodePattern, "with --topology sni: the brokers' server names, {id} standing for the node id, e.g. broker-{id}.kafka.example.com")
	fs.StringVar(&c.SNIControllerPattern, "sni-controller-pattern", c.SNIControllerPattern, "with --topology sni and --expose-controllers: the controllers' server names, {id} standing for the node id")
	fs.IntVar(&c.AdvertisedPort, "advertised-port", c.AdvertisedPort, "with --topology sni or single: the port written into every broker address, for a load balancer in front that listens on another port (default: the --listen port)")
}

type topologyValue Topology

func (v *topologyValue) String() string { return string(*v) }
func (v *topologyValue) Type() string   { return "topology" }
func (v *topologyValue) Set(s string) error {
	switch t := Topology(s); t {
	case "", TopologyPorts, TopologySNI, TopologySingle: // "": the zero value, ports
		*v = topologyValue(t)
		return nil
	}
	return expectation("must be ports, sni or single")
}

// validateTopology checks the topology and the settings that belong to it.
func (c *Config) validateTopology() error {
	switch c.Topology {
	case "", TopologyPorts, TopologySingle:
		for _, f := range []struct{ name, value string }{
			{"sni-bootstrap", c.SNIBootstrap},
			{"sni-node-pattern", c.SNINodePattern},
			{"sni-controller-pattern", c.SNIControllerPattern},
		} {
			if f.value != "" {
				return invalid(f.name, f.value, "applies only with --topology sni; set --topology sni to serve every broker on one TLS port")
			}
		}
		if c.Topology == TopologySingle {
			return c.validateSingle()
		}
		if c.AdvertisedPort != 0 {
			return invalid("advertised-port", strconv.Itoa(c.AdvertisedPort), "applies only with --topology sni or single; with --topology ports each broker is advertised on its own listener's port")
		}
		return nil
	case TopologySNI:
		return c.validateSNI()
	}
	return invalid("topology", string(c.Topology), "must be ports, sni or single")
}

// validateSingle checks the settings of TopologySingle: nothing that
// opens a listener of its own, and nothing that watches one upstream
// connection per client.
func (c *Config) validateSingle() error {
	switch {
	case c.NodePortBase != 0:
		return invalid("node-port-base", strconv.Itoa(c.NodePortBase), "applies only with --topology ports: with --topology single no node listener opens")
	case c.ExposeControllers:
		return invalid("expose-controllers", "true", "applies only with --topology ports or sni: with --topology single the KRaft quorum is not reachable")
	case c.Verify:
		return invalid("verify", "true", "applies only with --topology ports or sni, because --topology single spreads each client connection over several brokers, so there is no one upstream order to verify")
	case c.AdvertisedPort < 0 || c.AdvertisedPort > 65535:
		return invalid("advertised-port", strconv.Itoa(c.AdvertisedPort), "is not a port (1 to 65535, or 0 for the --listen port)")
	}
	return nil
}

// validateSNI checks the settings of TopologySNI: TLS on, both names given
// and usable, and no name that two of them could claim.
func (c *Config) validateSNI() error {
	if c.TLSCert == "" {
		return invalid("topology", string(c.Topology), "needs --tls-cert and --tls-key: the broker is picked by the server name a client sends in its TLS handshake")
	}
	if c.SNIBootstrap == "" {
		return invalid("topology", string(c.Topology), "needs --sni-bootstrap, the server name clients bootstrap from (e.g. bootstrap.kafka.example.com)")
	}
	if c.SNINodePattern == "" {
		return invalid("topology", string(c.Topology), "needs --sni-node-pattern, the brokers' server names with {id} for the node id (e.g. broker-{id}.kafka.example.com)")
	}
	if err := sni.CheckName(c.SNIBootstrap); err != nil {
		return invalid("sni-bootstrap", c.SNIBootstrap, "is "+err.Error())
	}
	node, err := sni.ParsePattern(c.SNINodePattern)
	if err != nil {
		return invalid("sni-node-pattern", c.SNINodePattern, "is "+err.Error())
	}
	boot := sni.Normalize(c.SNIBootstrap)
	if node.Covers(boot) {
		return invalid("sni-bootstrap", c.SNIBootstrap, fmt.Sprintf("has the shape of a broker's name under --sni-node-pattern %s: choose a bootstrap name the pattern cannot give", c.SNINodePattern))
	}
	if c.NodePortBase != 0 {
		return invalid("node-port-base", strconv.Itoa(c.NodePortBase), "applies only with --topology ports: with --topology sni no node listener opens")
	}
	if c.AdvertisedPort < 0 || c.AdvertisedPort > 65535 {
		return invalid("advertised-port", strconv.Itoa(c.AdvertisedPort), "is not a port (1 to 65535, or 0 for the --listen port)")
	}
	switch {
	case c.SNIControllerPattern != "" && !c.ExposeControllers:
		return invalid("sni-controller-pattern", c.SNIControllerPattern, "applies only with --expose-controllers; without it controllers are not reachable through the proxy")
	case c.ExposeControllers && c.SNIControllerPattern == "":
		return invalid("expose-controllers", "true", "with --topology sni needs --sni-controller-pattern, the server names controllers are reached by, e.g. controller-{id}.kafka.example.com")
	case c.SNIControllerPattern == "":
		return nil
	}
	ctl, err := sni.ParsePattern(c.SNIControllerPattern)
	if err != nil {
		return invalid("sni-controller-pattern", c.SNIControllerPattern, "is "+err.Error())
	}
	if ctl.Covers(boot) {
		return invalid("sni-bootstrap", c.SNIBootstrap, fmt.Sprintf("has the shape of a controller's name under --sni-controller-pattern %s: choose a bootstrap name the pattern cannot give", c.SNIControllerPattern))
	}
	if sni.Overlaps(node, ctl) {
		return invalid("sni-controller-pattern", c.SNIControllerPattern, fmt.Sprintf("can give a name that --sni-node-pattern %s gives too: make the two differ outside {id}, e.g. broker-{id} and controller-{id}", c.SNINodePattern))
	}
	return nil
}
