// Package deploy_test checks the deployment assets: every manifest decoded
// strictly into the Kubernetes API types, the Helm chart rendered with
// Helm's own engine, the compose file loaded with the compose
// specification's loader, the dashboard's queries against the metric names
// inorder registers, and the Dockerfile's build. It is a module of its own
// so that none of this tooling reaches the inorder binary.
package deploy_test

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	"github.com/spf13/pflag"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
	"sigs.k8s.io/yaml"

	"github.com/inorder-proxy/inorder/config"
)

// object is one decoded manifest.
type object struct {
	source string // file and document index, for messages
	kind   string
	obj    any
}

// newObject returns an empty API object for apiVersion and kind, or nil for
// a kind the assets are not expected to hold.
func newObject(apiVersion, kind string) any {
	switch apiVersion + "/" + kind {
	case "apps/v1/Deployment":
		return &appsv1.Deployment{}
	case "v1/Service":
		return &corev1.Service{}
	case "v1/ConfigMap":
		return &corev1.ConfigMap{}
	case "policy/v1/PodDisruptionBudget":
		return &policyv1.PodDisruptionBudget{}
	case "monitoring.coreos.com/v1/ServiceMonitor":
		return &monitoringv1.ServiceMonitor{}
	case "gateway.networking.k8s.io/v1/TLSRoute":
		return &gatewayv1.TLSRoute{}
	}
	return nil
}

// decodeManifests splits a YAML stream into documents and decodes each
// strictly into its API type, failing the test on any error.
func decodeManifests(t *testing.T, source string, data []byte) []object {
	t.Helper()
	out, err := decodeAll(source, data)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// decodeAll decodes every document of a YAML stream strictly: an unknown
// or misspelled field, a kind the assets should not hold, or a wrong value
// type is an error.
func decodeAll(source string, data []byte) ([]object, error) {
	var out []object
	for i, doc := range bytes.Split(data, []byte("\n---")) {
		doc = bytes.TrimSpace(doc)
		if len(stripComments(doc)) == 0 {
			continue
		}
		name := fmt.Sprintf("%s#%d", source, i)
		var tm metav1.TypeMeta
		if err := yaml.Unmarshal(doc, &tm); err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		obj := newObject(tm.APIVersion, tm.Kind)
		if obj == nil {
			return nil, fmt.Errorf("%s: unexpected apiVersion %q kind %q", name, tm.APIVersion, tm.Kind)
		}
		if err := yaml.UnmarshalStrict(doc, obj); err != nil {
			return nil, fmt.Errorf("%s: %s does not decode strictly: %w", name, tm.Kind, err)
		}
		out = append(out, object{source: name, kind: tm.Kind, obj: obj})
	}
	return out, nil
}

func stripComments(doc []byte) []byte {
	var keep [][]byte
	for _, line := range bytes.Split(doc, []byte("\n")) {
		if t := bytes.TrimSpace(line); len(t) > 0 && t[0] != '#' {
			keep = append(keep, line)
		}
	}
	return bytes.Join(keep, []byte("\n"))
}

// loadInorderConfig reads an inorder configuration file and flags the way
// the binary does, with its validation.
func loadInorderConfig(t *testing.T, source, file string, args []string) config.Config {
	t.Helper()
	fs := pflag.NewFlagSet("inorder", pflag.ContinueOnError)
	var cfg config.Config
	fs.String(config.FlagConfig, "", "")
	config.BindFlags(fs, &cfg)
	if file != "" {
		args = append(args, "--config="+file)
	}
	if err := fs.Parse(args); err != nil {
		t.Fatalf("%s: inorder flags: %v", source, err)
	}
	cfg, err := config.Resolve(fs, config.Default())
	if err != nil {
		t.Fatalf("%s: inorder refuses the configuration: %v", source, err)
	}
	return cfg
}

// configFromMap writes the inorder.yaml of a ConfigMap to a file and loads
// it.
func configFromMap(t *testing.T, source string, cm *corev1.ConfigMap) config.Config {
	t.Helper()
	data, ok := cm.Data["inorder.yaml"]
	if !ok {
		t.Fatalf("%s: ConfigMap %s has no inorder.yaml", source, cm.Name)
	}
	file := filepath.Join(t.TempDir(), "inorder.yaml")
	if err := os.WriteFile(file, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
	return loadInorderConfig(t, source, file, nil)
}

// runtimeHeadroom is what serve's resident memory may exceed max-memory by
// (README): serve sets the runtime's soft limit to max-memory + 32 MiB
// (cmd/memlimit.go) for what the budget does not count (the runtime,
// goroutine stacks, connection state, metrics, garbage not yet collected),
// and the binary's code (about 12 MiB resident) and what the collector
// overshoots its limit by come on top. Measured peaks under the
// hostile-client test's attack: max-memory + 29 MiB at 16MiB, + 43 MiB at
// 32MiB, + 38 MiB at 256MiB. A memory limit below max-memory plus this
// would kill a proxy whose budget is full, which is what the budget is for.
const runtimeHeadroom = 64 << 20

// A sidecar is the size of a small pod: a budget of at most 32MiB under a
// memory limit of 64 to 96 MiB.
const (
	sidecarMaxMemory = 32 << 20
	sidecarMinLimit  = 64 << 20
	sidecarMaxLimit  = 96 << 20
)

// A sidecar in the single topology was measured delivering the sidecar
// load (consumers at the clients' default fetch settings, producers
// sending 1 MiB batches) in front of Apache Kafka's three-node cluster
// under its budget plus 64 MiB at 64MiB, 128MiB and 512MiB: at 32MiB
// consumers stalled, and at 256MiB resident memory passed the budget plus
// 64 MiB (deploy/README.md, "The single topology as a sidecar").
const (
	singleSidecarMinMemory = 64 << 20
	singleSidecarMaxMemory = 128 << 20 // up to singleSidecarLarge
	singleSidecarLarge     = 512 << 20
)

// memoryLimitProblem says what is wrong with a container memory limit of
// limit bytes (0: none) for inorder running with cfg, or "".
func memoryLimitProblem(limit int64, cfg config.Config) string {
	switch {
	case limit == 0:
		return fmt.Sprintf("no memory limit: set one above max-memory (%d MiB) plus %d MiB", cfg.Memory()>>20, runtimeHeadroom>>20)
	case limit < cfg.Memory()+runtimeHeadroom:
		return fmt.Sprintf("memory limit %d MiB is below max-memory %d MiB plus the %d MiB resident memory may exceed it by (README): a full budget would be killed",
			limit>>20, cfg.Memory()>>20, runtimeHeadroom>>20)
	}
	return ""
}

// sidecarProblem says how a sidecar's budget or memory limit is larger
// than a small pod's, or, in the single topology, outside the budgets it
// was measured to work at, or "".
func sidecarProblem(limit int64, cfg config.Config) string {
	if cfg.Topology == config.TopologySingle {
		if m := cfg.Memory(); m < singleSidecarMinMemory || m > singleSidecarMaxMemory && m < singleSidecarLarge {
			return fmt.Sprintf("max-memory %d MiB is outside the %d-%d MiB, or %d MiB or more, a sidecar in the single topology was measured to work at",
				m>>20, singleSidecarMinMemory>>20, singleSidecarMaxMemory>>20, singleSidecarLarge>>20)
		}
		return memoryLimitProblem(limit, cfg)
	}
	switch {
	case cfg.Memory() > sidecarMaxMemory:
		return fmt.Sprintf("max-memory %d MiB is more than a sidecar's %d MiB", cfg.Memory()>>20, sidecarMaxMemory>>20)
	case limit < sidecarMinLimit || limit > sidecarMaxLimit:
		return fmt.Sprintf("memory limit %d MiB is outside a sidecar's %d-%d MiB", limit>>20, sidecarMinLimit>>20, sidecarMaxLimit>>20)
	}
	return ""
}

// checkWorkload checks what every inorder pod in the assets must have:
// the inorder container runs serve as non-root on a read-only root with no
// capabilities, has liveness and readiness probes on the admin endpoint,
// resource requests, a memory limit that a full budget fits under, and a
// termination grace period longer than the shutdown grace.
func checkWorkload(t *testing.T, source string, d *appsv1.Deployment, cfg config.Config) {
	t.Helper()
	spec := d.Spec.Template.Spec
	var c *corev1.Container
	for _, list := range [][]corev1.Container{spec.Containers, spec.InitContainers} {
		for i := range list {
			if list[i].Name == "inorder" {
				c = &list[i]
			}
		}
	}
	if c == nil {
		t.Fatalf("%s: Deployment %s has no inorder container", source, d.Name)
	}
	if len(c.Args) == 0 || c.Args[0] != "serve" {
		t.Errorf("%s: inorder args %v do not run serve", source, c.Args)
	}
	sc := c.SecurityContext
	if sc == nil || sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot || sc.RunAsUser == nil || *sc.RunAsUser == 0 ||
		sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem ||
		sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation ||
		sc.Capabilities == nil || len(sc.Capabilities.Drop) != 1 || sc.Capabilities.Drop[0] != "ALL" {
		t.Errorf("%s: inorder's security context is not non-root, read-only, without privileges: %+v", source, sc)
	}
	_, adminPort, _ := strings.Cut(cfg.AdminListen, ":")
	for probe, want := range map[*corev1.Probe]string{c.LivenessProbe: "/healthz", c.ReadinessProbe: "/readyz"} {
		if probe == nil || probe.HTTPGet == nil || probe.HTTPGet.Path != want {
			t.Errorf("%s: inorder lacks an HTTP probe on %s", source, want)
			continue
		}
		if !portMatches(c, probe.HTTPGet.Port.String(), adminPort) {
			t.Errorf("%s: probe %s on port %s, but the admin endpoint listens on %s", source, want, probe.HTTPGet.Port.String(), cfg.AdminListen)
		}
	}
	if c.Resources.Requests.Cpu().IsZero() || c.Resources.Requests.Memory().IsZero() {
		t.Errorf("%s: inorder has no CPU and memory requests", source)
	}
	if p := memoryLimitProblem(c.Resources.Limits.Memory().Value(), cfg); p != "" {
		t.Errorf("%s: inorder: %s", source, p)
	}
	grace := spec.TerminationGracePeriodSeconds
	if grace == nil || time.Duration(*grace)*time.Second <= cfg.ShutdownGrace {
		t.Errorf("%s: terminationGracePeriodSeconds %v is not longer than shutdown-grace %s", source, grace, cfg.ShutdownGrace)
	}
}

// portMatches reports whether a probe's port (a name or a number) is the
// admin port.
func portMatches(c *corev1.Container, port, adminPort string) bool {
	if port == adminPort {
		return true
	}
	for _, p := range c.Ports {
		if p.Name == port {
			return fmt.Sprint(p.ContainerPort) == adminPort
		}
	}
	return false
}
