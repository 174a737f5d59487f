package deploy_test

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/engine"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
	"sigs.k8s.io/yaml"

	"github.com/inorder-proxy/inorder/config"
)

const chartDir = "../helm/inorder"

// render renders the chart with Helm's engine as `helm template` does,
// after checking the values against the chart's schema.
func render(t *testing.T, ch *chart.Chart, values map[string]any) (manifestSet, error) {
	t.Helper()
	opts := chartutil.ReleaseOptions{Name: "kafka-gw", Namespace: "streaming", IsInstall: true, Revision: 1}
	vals, err := chartutil.ToRenderValues(ch, values, opts, chartutil.DefaultCapabilities)
	if err != nil {
		return manifestSet{}, err
	}
	if err := chartutil.ValidateAgainstSchema(ch, vals["Values"].(chartutil.Values)); err != nil {
		return manifestSet{}, err
	}
	out, err := engine.Render(ch, vals)
	if err != nil {
		return manifestSet{}, err
	}
	names := make([]string, 0, len(out))
	for name := range out {
		names = append(names, name)
	}
	sort.Strings(names)
	set := manifestSet{name: "chart"}
	for _, name := range names {
		if !strings.HasSuffix(name, ".yaml") {
			continue
		}
		objs, err := decodeAll(name, []byte(out[name]))
		if err != nil {
			return manifestSet{}, err
		}
		set.objects = append(set.objects, objs...)
	}
	return set, nil
}

func loadChart(t *testing.T) *chart.Chart {
	t.Helper()
	ch, err := loader.Load(chartDir)
	if err != nil {
		t.Fatal(err)
	}
	return ch
}

func readValues(t *testing.T, file string) map[string]any {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var v map[string]any
	if err := yaml.Unmarshal(data, &v); err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	return v
}

// TestHelmChart renders the chart with its default values and with each
// example, decodes the output strictly into the API types, and checks the
// workload and, for a gateway, its ports, as for the plain manifests.
func TestHelmChart(t *testing.T) {
	ch := loadChart(t)
	examples, err := filepath.Glob(filepath.Join(chartDir, "examples", "*.yaml"))
	if err != nil || len(examples) == 0 {
		t.Fatalf("no example values (%v)", err)
	}
	cases := map[string]map[string]any{"default values": nil}
	for _, f := range examples {
		cases[filepath.Base(f)] = readValues(t, f)
	}
	for name, values := range cases {
		t.Run(name, func(t *testing.T) {
			set, err := render(t, ch, values)
			if err != nil {
				t.Fatal(err)
			}
			set.name = name
			ds := set.deployments()
			if len(ds) != 1 {
				t.Fatalf("%d Deployments, want 1", len(ds))
			}
			cfg := set.inorderConfig(t, ds[0])
			checkWorkload(t, name, ds[0], cfg)
			shape, _ := values["shape"].(string)
			if shape == "sidecar" {
				if !strings.HasPrefix(cfg.Listen, "127.0.0.1:") {
					t.Errorf("sidecar listens on %s", cfg.Listen)
				}
				checkSidecar(t, name, ds[0], cfg)
				if cfg.Topology == config.TopologySingle {
					checkSinglePort(t, set, ds[0], cfg)
				}
				return
			}
			switch cfg.Topology {
			case config.TopologySNI:
				checkSNIPort(t, set, ds[0], cfg)
				return
			case config.TopologySingle:
				checkSinglePort(t, set, ds[0], cfg)
				return
			}
			checkGatewayPorts(t, set, ds[0], cfg)
		})
	}
}

// TestHelmSecretsAreFiles: with TLS and SASL set (the gateway example),
// certificates and the password reach the proxy as mounted files, and no
// secret value is in the ConfigMap; the ServiceMonitor scrapes the admin
// port.
func TestHelmSecretsAreFiles(t *testing.T) {
	set, err := render(t, loadChart(t), readValues(t, filepath.Join(chartDir, "examples", "gateway.yaml")))
	if err != nil {
		t.Fatal(err)
	}
	d := set.deployments()[0]
	cfg := set.inorderConfig(t, d)
	mounted := map[string]string{}
	for _, c := range d.Spec.Template.Spec.Containers {
		for _, m := range c.VolumeMounts {
			mounted[m.MountPath] = m.Name
		}
	}
	secrets := map[string]string{}
	for _, v := range d.Spec.Template.Spec.Volumes {
		if v.Secret != nil {
			secrets[v.Name] = v.Secret.SecretName
		}
	}
	for setting, file := range map[string]string{
		"tls-cert": cfg.Security.TLSCert, "tls-key": cfg.Security.TLSKey, "tls-client-ca": cfg.Security.TLSClientCA,
		"upstream-tls-ca": cfg.Security.UpstreamTLSCA, "upstream-sasl-password-file": cfg.Security.UpstreamSASLPasswordFile,
	} {
		// The configuration was loaded with its files placed under a
		// temporary root; the pod sees them at /etc/inorder/...
		i := strings.Index(file, "/etc/inorder/")
		if i < 0 {
			t.Errorf("%s = %q is not under /etc/inorder", setting, file)
			continue
		}
		vol, ok := mounted[filepath.Dir(file[i:])]
		if !ok || secrets[vol] == "" {
			t.Errorf("%s = %q is not a file in a mounted Secret", setting, file)
		}
	}
	var monitors int
	for _, o := range set.objects {
		if sm, ok := o.obj.(*monitoringv1.ServiceMonitor); ok {
			monitors++
			if len(sm.Spec.Endpoints) != 1 || sm.Spec.Endpoints[0].Port != "admin" || sm.Spec.Endpoints[0].Path != "/metrics" {
				t.Errorf("ServiceMonitor endpoints %+v do not scrape admin /metrics", sm.Spec.Endpoints)
			}
		}
	}
	if monitors != 1 {
		t.Errorf("%d ServiceMonitors with serviceMonitor.enabled, want 1", monitors)
	}
}

// TestHelmSchemaRejectsMisspelledValues: a misspelled value fails instead
// of being silently ignored.
func TestHelmSchemaRejectsMisspelledValues(t *testing.T) {
	_, err := render(t, loadChart(t), map[string]any{"replica": 3})
	if err == nil || !strings.Contains(err.Error(), "replica") {
		t.Fatalf("a misspelled value rendered: %v", err)
	}
	_, err = render(t, loadChart(t), map[string]any{"limits": map[string]any{"maxMemmory": "1GiB"}})
	if err == nil {
		t.Fatal("a misspelled nested value rendered")
	}
}

// checkSNIPort: in the sni topology the Service exposes one port, the one
// inorder writes into every broker address, reaching the container port
// inorder listens on; inorder has a certificate and both names, and no
// container port is left for node listeners.
func checkSNIPort(t *testing.T, s manifestSet, d *appsv1.Deployment, cfg config.Config) {
	t.Helper()
	ports := containerPorts(d)
	_, listenPort, _ := strings.Cut(cfg.Listen, ":")
	if len(ports) != 2 || fmt.Sprint(ports["kafka"]) != listenPort || ports["admin"] == 0 {
		t.Errorf("%s: container ports %v, want kafka on the listen port %s and admin only", s.name, ports, listenPort)
	}
	advertised := cfg.AdvertisedPort
	if advertised == 0 {
		advertised, _ = strconv.Atoi(listenPort)
	}
	var found int
	for _, o := range s.objects {
		svc, ok := o.obj.(*corev1.Service)
		if !ok || svc.Labels["app.kubernetes.io/component"] == "admin" {
			continue
		}
		found++
		if len(svc.Spec.Ports) != 1 {
			t.Errorf("%s: the Service has %d ports, want the one", s.name, len(svc.Spec.Ports))
			continue
		}
		p := svc.Spec.Ports[0]
		if int(p.Port) != advertised {
			t.Errorf("%s: the Service listens on %d, but inorder advertises port %d", s.name, p.Port, advertised)
		}
		if ports[p.TargetPort.String()] == 0 || fmt.Sprint(ports[p.TargetPort.String()]) != listenPort {
			t.Errorf("%s: the Service targets %s, not the port inorder listens on", s.name, p.TargetPort.String())
		}
	}
	if found != 1 {
		t.Errorf("%s: %d client Services, want 1", s.name, found)
	}
	if cfg.TLSCert == "" || cfg.SNIBootstrap == "" || cfg.SNINodePattern == "" || cfg.NodePortBase != 0 {
		t.Errorf("%s: sni without its certificate or names, or with node ports: %+v", s.name, cfg)
	}
	for _, o := range s.objects {
		r, ok := o.obj.(*gatewayv1.TLSRoute)
		if !ok {
			continue
		}
		names := cfg.Names()
		covered := func(name string) bool {
			for _, h := range r.Spec.Hostnames {
				if string(h) == name || strings.HasPrefix(string(h), "*.") && strings.HasSuffix(name, string(h)[1:]) && !strings.Contains(strings.TrimSuffix(name, string(h)[1:]), ".") {
					return true
				}
			}
			return false
		}
		for _, name := range []string{names.Bootstrap, names.Node.Name(0), names.Node.Name(2147483647)} {
			if !covered(name) {
				t.Errorf("%s: the TLSRoute's hostnames %v do not cover %s", s.name, r.Spec.Hostnames, name)
			}
		}
		if len(r.Spec.Rules) != 1 || len(r.Spec.Rules[0].BackendRefs) != 1 {
			t.Fatalf("%s: the TLSRoute's rules %+v", s.name, r.Spec.Rules)
		}
		b := r.Spec.Rules[0].BackendRefs[0]
		if b.Port == nil || int(*b.Port) != advertised || string(b.Name) != d.Name {
			t.Errorf("%s: the TLSRoute sends to %s:%v, want the Service %s on %d", s.name, b.Name, b.Port, d.Name, advertised)
		}
		if len(r.Spec.ParentRefs) == 0 {
			t.Errorf("%s: the TLSRoute attaches to no Gateway", s.name)
		}
	}
}

// TestHelmSNIRefusals: the sni topology without a certificate, without its
// names, in a sidecar, or with a TLSRoute and no Gateway to attach to, or
// with a node pattern a route's wildcard cannot cover, fails to render
// with a message saying what is missing.
func TestHelmSNIRefusals(t *testing.T) {
	ch := loadChart(t)
	base := func() map[string]any {
		return map[string]any{
			"topology": "sni",
			"sni":      map[string]any{"bootstrap": "bootstrap.kafka.example.com", "nodePattern": "broker-{id}.kafka.example.com"},
			"tls":      map[string]any{"secretName": "cert"},
		}
	}
	if _, err := render(t, ch, base()); err != nil {
		t.Fatalf("the base case does not render: %v", err)
	}
	for _, tc := range []struct {
		mut  func(map[string]any)
		want string
	}{
		{func(v map[string]any) { delete(v, "tls") }, "needs tls.secretName"},
		{func(v map[string]any) { v["sni"].(map[string]any)["nodePattern"] = "" }, "needs sni.bootstrap and sni.nodePattern"},
		{func(v map[string]any) {
			v["shape"] = "sidecar"
			v["sidecar"] = map[string]any{"app": map[string]any{"image": "app"}}
		}, "topology: sni is for shape: gateway"},
		{func(v map[string]any) { v["sni"].(map[string]any)["tlsRoute"] = map[string]any{"enabled": true} }, "parentRefs must name the Gateway"},
		{func(v map[string]any) {
			v["sni"].(map[string]any)["nodePattern"] = "kafka.{id}.example.com"
			v["sni"].(map[string]any)["tlsRoute"] = map[string]any{"enabled": true, "parentRefs": []any{map[string]any{"name": "edge"}}}
		}, "sni.tlsRoute.hostnames is required"},
		{func(v map[string]any) { v["topology"] = "mesh" }, "topology"},
	} {
		v := base()
		tc.mut(v)
		if _, err := render(t, ch, v); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: rendered with error %v, want one saying %q", v, err, tc.want)
		}
	}
}

// TestHelmSingle renders both shapes with topology: single (the gateway and
// sidecar examples with only the topology changed) and checks that each
// pod runs the single topology behind one Kafka port, with its probes on
// the admin endpoint and a memory limit its budget fits under.
func TestHelmSingle(t *testing.T) {
	ch := loadChart(t)
	for _, example := range []string{"gateway.yaml", "sidecar-single.yaml"} {
		t.Run(example, func(t *testing.T) {
			values := readValues(t, filepath.Join(chartDir, "examples", example))
			values["topology"] = "single"
			set, err := render(t, ch, values)
			if err != nil {
				t.Fatal(err)
			}
			set.name = example + " with topology: single"
			ds := set.deployments()
			if len(ds) != 1 {
				t.Fatalf("%d Deployments, want 1", len(ds))
			}
			cfg := set.inorderConfig(t, ds[0])
			checkWorkload(t, set.name, ds[0], cfg)
			if values["shape"] == "sidecar" {
				checkSidecar(t, set.name, ds[0], cfg)
			}
			checkSinglePort(t, set, ds[0], cfg)
		})
	}
	// The small sidecar with only the topology changed is refused: its
	// budget is below what the single topology was measured to work at,
	// and so are the budgets between 128MiB and 512MiB.
	small := readValues(t, filepath.Join(chartDir, "examples", "sidecar.yaml"))
	small["topology"] = "single"
	const refusal = "needs limits.maxMemory from 64MiB to 128MiB, or 512MiB or more"
	small["resources"] = map[string]any{"requests": map[string]any{"cpu": "250m", "memory": "192Mi"}, "limits": map[string]any{"memory": "1152Mi"}}
	for _, mem := range []string{"32MiB", "63MiB", "129MiB", "256MiB", "511MiB"} {
		small["limits"].(map[string]any)["maxMemory"] = mem
		if _, err := render(t, ch, small); err == nil || !strings.Contains(err.Error(), refusal) {
			t.Errorf("sidecar.yaml with topology: single and maxMemory %s rendered with error %v", mem, err)
		}
	}
	for _, mem := range []string{"64MiB", "128MiB", "512MiB", "1GiB"} {
		small["limits"].(map[string]any)["maxMemory"] = mem
		if _, err := render(t, ch, small); err != nil {
			t.Errorf("a single sidecar with maxMemory %s is refused: %v", mem, err)
		}
	}
}

// checkSinglePort: in the single topology inorder serves the whole cluster
// on its listen port and opens no node listener. A gateway's pod has that
// one Kafka port beside the admin port and its Service exposes it once, on
// the port inorder advertises, at the host it advertises; a sidecar's
// application bootstraps from that one loopback address, and nothing else
// exposes Kafka.
func checkSinglePort(t *testing.T, s manifestSet, d *appsv1.Deployment, cfg config.Config) {
	t.Helper()
	if cfg.Topology != config.TopologySingle {
		t.Fatalf("%s: topology %q, want single", s.name, cfg.Topology)
	}
	if cfg.NodePortBase != 0 || cfg.ExposeControllers {
		t.Errorf("%s: single with node listeners: node-port-base %d, expose-controllers %v", s.name, cfg.NodePortBase, cfg.ExposeControllers)
	}
	host, listenPort, _ := strings.Cut(cfg.Listen, ":")
	ports := containerPorts(d)
	var clients []*corev1.Service
	for _, o := range s.objects {
		if svc, ok := o.obj.(*corev1.Service); ok && svc.Labels["app.kubernetes.io/component"] != "admin" {
			clients = append(clients, svc)
		}
	}
	if host == "127.0.0.1" {
		if len(ports) != 1 || ports["admin"] == 0 {
			t.Errorf("%s: a sidecar's container ports %v, want admin only: Kafka stays on loopback", s.name, ports)
		}
		if len(clients) != 0 {
			t.Errorf("%s: %d Services expose a sidecar's Kafka port", s.name, len(clients))
		}
		if cfg.AdvertisedPort != 0 && strconv.Itoa(cfg.AdvertisedPort) != listenPort {
			t.Errorf("%s: a sidecar advertises port %d but listens on %s", s.name, cfg.AdvertisedPort, cfg.Listen)
		}
		var apps int
		for _, c := range d.Spec.Template.Spec.Containers {
			for _, e := range c.Env {
				if e.Name == "KAFKA_BOOTSTRAP_SERVERS" {
					apps++
					if e.Value != cfg.Listen {
						t.Errorf("%s: the application bootstraps from %s, but inorder listens on %s", s.name, e.Value, cfg.Listen)
					}
				}
			}
		}
		if apps != 1 {
			t.Errorf("%s: %d containers are given the bootstrap address, want the application", s.name, apps)
		}
		return
	}
	if len(ports) != 2 || fmt.Sprint(ports["kafka"]) != listenPort || ports["admin"] == 0 {
		t.Errorf("%s: container ports %v, want kafka on the listen port %s and admin only", s.name, ports, listenPort)
	}
	advertised := cfg.AdvertisedPort
	if advertised == 0 {
		advertised, _ = strconv.Atoi(listenPort)
	}
	if len(clients) != 1 {
		t.Fatalf("%s: %d client Services, want 1", s.name, len(clients))
	}
	svc := clients[0]
	if len(svc.Spec.Ports) != 1 {
		t.Fatalf("%s: the Service has %d ports, want the one", s.name, len(svc.Spec.Ports))
	}
	p := svc.Spec.Ports[0]
	if int(p.Port) != advertised {
		t.Errorf("%s: the Service listens on %d, but inorder advertises port %d", s.name, p.Port, advertised)
	}
	if fmt.Sprint(ports[p.TargetPort.String()]) != listenPort {
		t.Errorf("%s: the Service targets %s, not the port inorder listens on", s.name, p.TargetPort.String())
	}
	if cfg.AdvertisedHost == "" {
		t.Errorf("%s: a gateway must advertise the Service's host", s.name)
	}
}
