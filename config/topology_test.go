package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// tlsPair writes placeholder certificate and key files: validation only
// checks that they are given and that the key is not readable by others.
func tlsPair(t *testing.T) []string {
	t.Helper()
	dir := t.TempDir()
	cert, key := filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	for _, f := range []string{cert, key} {
		if err := os.WriteFile(f, []byte("x"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return []string{"--tls-cert", cert, "--tls-key", key}
}

func resolveArgs(t *testing.T, args ...string) (Config, error) {
	t.Helper()
	c := Default()
	fs := flags(&c)
	if err := fs.Parse(args); err != nil {
		return Config{}, FlagError(err)
	}
	return Resolve(fs, Default())
}

// with returns a new slice of a's and b's elements.
func with(a []string, b ...string) []string {
	return append(append([]string(nil), a...), b...)
}

func TestTopologySNI(t *testing.T) {
	sni := with([]string{"--topology", "sni", "--sni-bootstrap", "Bootstrap.Kafka.Example.com",
		"--sni-node-pattern", "broker-{id}.kafka.example.com"}, tlsPair(t)...)
	got, err := resolveArgs(t, with(sni, "--advertised-port", "443")...)
	if err != nil {
		t.Fatal(err)
	}
	n := got.Names()
	if got.Topology != TopologySNI || n.Bootstrap != "bootstrap.kafka.example.com" || n.Node.Name(3) != "broker-3.kafka.example.com" ||
		!n.Controller.IsZero() || got.AdvertisedPort != 443 {
		t.Fatalf("resolved %+v, names %+v", got, n)
	}
	got, err = resolveArgs(t, with(sni, "--expose-controllers", "--sni-controller-pattern", "controller-{id}.kafka.example.com")...)
	if err != nil {
		t.Fatal(err)
	}
	if name := got.Names().Controller.Name(1); name != "controller-1.kafka.example.com" {
		t.Fatalf("controller 1 named %q", name)
	}
	if d := Default(); d.Topology != TopologyPorts || !d.Names().Node.IsZero() {
		t.Fatalf("default topology %q", d.Topology)
	}

	// Every wrong combination is refused, naming the flag, the value and
	// what to do.
	pair := tlsPair(t)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--topology", "single"}, ``},
		{[]string{"--topology", "single", "--advertised-port", "443"}, ``},
		{[]string{"--topology", "single", "--node-port-base", "9100"}, `--node-port-base: "9100" applies only with --topology ports`},
		{[]string{"--topology", "single", "--expose-controllers"}, `--expose-controllers: "true" applies only with --topology ports or sni`},
		{[]string{"--topology", "single", "--verify"}, `--verify: "true" applies only with --topology ports or sni, because --topology single spreads each client connection over several brokers, so there is no one upstream order to verify`},
		{[]string{"--topology", "single", "--advertised-port", "-1"}, `--advertised-port: "-1" is not a port`},
		{[]string{"--topology", "single", "--sni-bootstrap", "b.example.com"}, `--sni-bootstrap: "b.example.com" applies only with --topology sni`},
		{[]string{"--topology", "mesh"}, `--topology: "mesh" must be ports, sni or single`},
		{[]string{"--topology", "sni", "--sni-bootstrap", "b.example.com", "--sni-node-pattern", "n{id}.example.com"}, `--topology: "sni" needs --tls-cert and --tls-key`},
		{with([]string{"--topology", "sni", "--sni-node-pattern", "n{id}.example.com"}, pair...), `--topology: "sni" needs --sni-bootstrap`},
		{with([]string{"--topology", "sni", "--sni-bootstrap", "b.example.com"}, pair...), `--topology: "sni" needs --sni-node-pattern`},
		{with(sni[:4], with([]string{"--sni-node-pattern", "broker.kafka.example.com"}, pair...)...), `--sni-node-pattern: "broker.kafka.example.com" is not a usable name pattern: it must contain {id} once`},
		{with(sni[:4], with([]string{"--sni-node-pattern", "b-{id}.{id}.example.com"}, pair...)...), `must contain {id} once`},
		{with(sni[:4], with([]string{"--sni-node-pattern", "b_{id}.example.com"}, pair...)...), `--sni-node-pattern: "b_{id}.example.com" is not a usable name pattern: node 0 would be "b_0.example.com", which is not a usable server name`},
		{with([]string{"--topology", "sni", "--sni-bootstrap", "broker-00.kafka.example.com", "--sni-node-pattern", "broker-{id}.kafka.example.com"}, pair...), `--sni-bootstrap: "broker-00.kafka.example.com" has the shape of a broker's name`},
		{with([]string{"--topology", "sni", "--sni-bootstrap", "a..b", "--sni-node-pattern", "broker-{id}.kafka.example.com"}, pair...), `--sni-bootstrap: "a..b" is not a usable server name`},
		{with(sni, "--node-port-base", "9100"), `--node-port-base: "9100" applies only with --topology ports`},
		{with(sni, "--advertised-port", "70000"), `--advertised-port: "70000" is not a port`},
		{with(sni, "--expose-controllers"), `--expose-controllers: "true" with --topology sni needs --sni-controller-pattern`},
		{with(sni, "--sni-controller-pattern", "c-{id}.kafka.example.com"), `--sni-controller-pattern: "c-{id}.kafka.example.com" applies only with --expose-controllers`},
		{with(sni, "--expose-controllers", "--sni-controller-pattern", "broker-{id}0.kafka.example.com"), `--sni-controller-pattern: "broker-{id}0.kafka.example.com" can give a name that --sni-node-pattern broker-{id}.kafka.example.com gives too`},
		{with(sni, "--expose-controllers", "--sni-controller-pattern", "bootstrap{id}.kafka.example.com"), ``},
		{[]string{"--sni-bootstrap", "b.example.com"}, `--sni-bootstrap: "b.example.com" applies only with --topology sni`},
		{[]string{"--sni-node-pattern", "n{id}"}, `--sni-node-pattern: "n{id}" applies only with --topology sni`},
		{[]string{"--advertised-port", "443"}, `--advertised-port: "443" applies only with --topology sni`},
		{[]string{"--topology", "ports", "--sni-controller-pattern", "c{id}"}, `applies only with --topology sni`},
	} {
		_, err := resolveArgs(t, tc.args...)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%q refused: %v", tc.args, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%q: error %v, want it to say %q", tc.args, err, tc.want)
		}
	}
}

// TestTopologyFromFile: the same keys in the YAML file, and an error that
// names the file.
func TestTopologyFromFile(t *testing.T) {
	pair := tlsPair(t)
	file := filepath.Join(t.TempDir(), "c.yaml")
	os.WriteFile(file, []byte("topology: sni\nsni-bootstrap: kafka.example.com\nsni-node-pattern: 'b{id}.kafka.example.com'\nadvertised-port: 9093\ntls-cert: "+pair[1]+"\ntls-key: "+pair[3]+"\n"), 0o600)
	got, err := resolveArgs(t, "--config", file)
	if err != nil {
		t.Fatal(err)
	}
	if got.Topology != TopologySNI || got.Names().Node.Name(2) != "b2.kafka.example.com" || got.AdvertisedPort != 9093 {
		t.Fatalf("resolved %+v", got)
	}
	os.WriteFile(file, []byte("topology: single\nadvertised-port: 19092\n"), 0o600)
	if got, err := resolveArgs(t, "--config", file); err != nil || got.Topology != TopologySingle || got.AdvertisedPort != 19092 {
		t.Fatalf("single from a file: %+v, %v", got, err)
	}
	os.WriteFile(file, []byte("topology: single\nnode-port-base: 9100\n"), 0o600)
	if _, err := resolveArgs(t, "--config", file); err == nil || !strings.Contains(err.Error(), "config file "+file+":2: node-port-base: \"9100\" applies only with --topology ports") {
		t.Fatalf("single with node-port-base from a file: %v", err)
	}
}
