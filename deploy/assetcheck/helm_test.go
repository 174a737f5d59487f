package deploy_test

import (
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/engine"
	"sigs.k8s.io/yaml"
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
