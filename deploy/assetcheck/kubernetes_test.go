package deploy_test

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/inorder-proxy/inorder/config"
)

// manifestSet is the objects of one directory or one rendering.
type manifestSet struct {
	name    string
	objects []object
}

func (s manifestSet) deployments() []*appsv1.Deployment {
	var out []*appsv1.Deployment
	for _, o := range s.objects {
		if d, ok := o.obj.(*appsv1.Deployment); ok {
			out = append(out, d)
		}
	}
	return out
}

func (s manifestSet) configMap(name string) *corev1.ConfigMap {
	for _, o := range s.objects {
		if cm, ok := o.obj.(*corev1.ConfigMap); ok && cm.Name == name {
			return cm
		}
	}
	return nil
}

// inorderConfig returns the configuration the Deployment's inorder
// container would run with: its flags, and the file they name from the
// ConfigMap mounted there.
func (s manifestSet) inorderConfig(t *testing.T, d *appsv1.Deployment) config.Config {
	t.Helper()
	spec := d.Spec.Template.Spec
	idx := slices.IndexFunc(spec.Containers, func(c corev1.Container) bool { return c.Name == "inorder" })
	c := spec.Containers
	if idx < 0 {
		idx = slices.IndexFunc(spec.InitContainers, func(c corev1.Container) bool { return c.Name == "inorder" })
		c = spec.InitContainers
	}
	if idx < 0 {
		t.Fatalf("%s: no inorder container", s.name)
	}
	args := c[idx].Args[1:]
	var file string
	var flags []string
	for _, a := range args {
		if v, ok := strings.CutPrefix(a, "--config="); ok {
			file = v
			continue
		}
		flags = append(flags, a)
	}
	if file == "" {
		return loadInorderConfig(t, s.name, "", flags)
	}
	// Find the ConfigMap volume mounted over the file's directory.
	dir := filepath.Dir(file)
	var volume string
	for _, m := range c[idx].VolumeMounts {
		if m.MountPath == dir {
			volume = m.Name
		}
	}
	for _, v := range spec.Volumes {
		if v.Name == volume && v.ConfigMap != nil {
			cm := s.configMap(v.ConfigMap.Name)
			if cm == nil {
				t.Fatalf("%s: ConfigMap %s is mounted but not defined", s.name, v.ConfigMap.Name)
			}
			data, ok := cm.Data[filepath.Base(file)]
			if !ok {
				t.Fatalf("%s: ConfigMap %s has no %s", s.name, cm.Name, filepath.Base(file))
			}
			root := t.TempDir()
			data = s.materialize(t, root, c[idx], spec.Volumes, data)
			tmp := filepath.Join(root, filepath.Base(file))
			if err := os.WriteFile(tmp, []byte(data), 0o600); err != nil {
				t.Fatal(err)
			}
			return loadInorderConfig(t, s.name, tmp, flags)
		}
	}
	t.Fatalf("%s: --config=%s is not on a mounted ConfigMap", s.name, file)
	return config.Config{}
}

// mountedPath matches the absolute paths a configuration names.
var mountedPath = regexp.MustCompile(`/etc/inorder/[A-Za-z0-9._/-]+`)

// materialize creates, under root, every file the configuration names in a
// mounted volume, with the mode the volume gives it (a Secret's
// defaultMode), and returns the configuration with its paths moved under
// root: inorder refuses a secret file that other users can read, as a
// Secret mounted with the default mode 0644 would be.
func (s manifestSet) materialize(t *testing.T, root string, c corev1.Container, volumes []corev1.Volume, data string) string {
	t.Helper()
	for _, path := range mountedPath.FindAllString(data, -1) {
		var mount *corev1.VolumeMount
		for i := range c.VolumeMounts {
			if filepath.Dir(path) == c.VolumeMounts[i].MountPath {
				mount = &c.VolumeMounts[i]
			}
		}
		if mount == nil {
			t.Fatalf("%s: %s is not in a mounted volume", s.name, path)
		}
		mode := os.FileMode(0o644) // Kubernetes' default for Secret and ConfigMap files
		for _, v := range volumes {
			if v.Name == mount.Name && v.Secret != nil && v.Secret.DefaultMode != nil {
				mode = os.FileMode(*v.Secret.DefaultMode)
			}
		}
		local := filepath.Join(root, path)
		if err := os.MkdirAll(filepath.Dir(local), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(local, []byte("material"), mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(local, mode); err != nil {
			t.Fatal(err)
		}
	}
	return strings.ReplaceAll(data, "/etc/inorder/", root+"/etc/inorder/")
}

// containerPorts returns the inorder container's ports by name, whether it
// is an ordinary container or a native sidecar (an init container).
func containerPorts(d *appsv1.Deployment) map[string]int32 {
	ports := map[string]int32{}
	spec := d.Spec.Template.Spec
	for _, c := range append(spec.InitContainers, spec.Containers...) {
		if c.Name == "inorder" {
			for _, p := range c.Ports {
				ports[p.Name] = p.ContainerPort
			}
		}
	}
	return ports
}

// checkGatewayPorts: the Service exposes the bootstrap port and one port
// per broker, each a container port of the proxy at node-port-base + N.
func checkGatewayPorts(t *testing.T, s manifestSet, d *appsv1.Deployment, cfg config.Config) {
	t.Helper()
	ports := containerPorts(d)
	_, listenPort, _ := strings.Cut(cfg.Listen, ":")
	if fmt.Sprint(ports["bootstrap"]) != listenPort {
		t.Errorf("%s: container port bootstrap %d, but inorder listens on %s", s.name, ports["bootstrap"], cfg.Listen)
	}
	var found bool
	for _, o := range s.objects {
		svc, ok := o.obj.(*corev1.Service)
		if !ok || !slices.ContainsFunc(svc.Spec.Ports, func(p corev1.ServicePort) bool { return p.Name == "bootstrap" }) {
			continue
		}
		found = true
		nodes := 0
		for _, p := range svc.Spec.Ports {
			target, ok := ports[p.TargetPort.String()]
			if !ok {
				t.Errorf("%s: Service port %s targets %s, which the pod does not have", s.name, p.Name, p.TargetPort.String())
				continue
			}
			if p.Port != target {
				t.Errorf("%s: Service port %s is %d but reaches %d: clients are sent to the advertised port", s.name, p.Name, p.Port, target)
			}
			var n int
			if _, err := fmt.Sscanf(p.Name, "node-%d", &n); err == nil {
				nodes++
				if int(target) != cfg.NodePortBase+n {
					t.Errorf("%s: node %d on port %d, but inorder serves it on %d", s.name, n, target, cfg.NodePortBase+n)
				}
			}
		}
		if nodes == 0 {
			t.Errorf("%s: the Service exposes no broker port", s.name)
		}
	}
	if !found {
		t.Errorf("%s: no Service exposes the bootstrap port", s.name)
	}
	if cfg.NodePortBase == 0 || strings.HasSuffix(cfg.Listen, ":0") || cfg.ExposeControllers {
		t.Errorf("%s: replicas must agree on ports: set node-port-base, no port 0, no expose-controllers", s.name)
	}
	if cfg.AdvertisedHost == "" {
		t.Errorf("%s: a gateway must advertise the Service's host", s.name)
	}
}

func readManifestDir(t *testing.T, dir string) manifestSet {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("%s: no manifests (%v)", dir, err)
	}
	set := manifestSet{name: dir}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		set.objects = append(set.objects, decodeManifests(t, f, data)...)
	}
	return set
}

func TestKubernetesSidecar(t *testing.T) {
	set := readManifestDir(t, "../kubernetes/sidecar")
	ds := set.deployments()
	if len(ds) != 1 {
		t.Fatalf("%d Deployments, want 1", len(ds))
	}
	cfg := set.inorderConfig(t, ds[0])
	checkWorkload(t, set.name, ds[0], cfg)
	if !strings.HasPrefix(cfg.Listen, "127.0.0.1:") {
		t.Errorf("the sidecar listens on %s, not loopback", cfg.Listen)
	}
	checkSidecar(t, set.name, ds[0], cfg)
	if len(ds[0].Spec.Template.Spec.Containers) != 1 {
		t.Errorf("want the application as the one ordinary container beside the inorder sidecar")
	}
}

// TestKubernetesSidecarSingle: the sidecar in the single topology serves
// the application the whole cluster on one loopback port, with the budget
// the topology was measured to need.
func TestKubernetesSidecarSingle(t *testing.T) {
	set := readManifestDir(t, "../kubernetes/sidecar/single")
	ds := set.deployments()
	if len(ds) != 1 {
		t.Fatalf("%d Deployments, want 1", len(ds))
	}
	cfg := set.inorderConfig(t, ds[0])
	checkWorkload(t, set.name, ds[0], cfg)
	checkSidecar(t, set.name, ds[0], cfg)
	checkSinglePort(t, set, ds[0], cfg)
	if len(ds[0].Spec.Template.Spec.Containers) != 1 {
		t.Errorf("want the application as the one ordinary container beside the inorder sidecar")
	}
}

func TestKubernetesGateway(t *testing.T) {
	set := readManifestDir(t, "../kubernetes/gateway")
	ds := set.deployments()
	if len(ds) != 1 {
		t.Fatalf("%d Deployments, want 1", len(ds))
	}
	cfg := set.inorderConfig(t, ds[0])
	checkWorkload(t, set.name, ds[0], cfg)
	checkGatewayPorts(t, set, ds[0], cfg)
}

// checkSidecar checks that a sidecar Deployment's inorder fits a small pod.
func checkSidecar(t *testing.T, source string, d *appsv1.Deployment, cfg config.Config) {
	t.Helper()
	spec := d.Spec.Template.Spec
	for _, c := range append(spec.InitContainers, spec.Containers...) {
		if c.Name != "inorder" {
			continue
		}
		if p := sidecarProblem(c.Resources.Limits.Memory().Value(), cfg); p != "" {
			t.Errorf("%s: inorder: %s", source, p)
		}
		return
	}
	t.Errorf("%s: no inorder container", source)
}

// TestMemoryChecksCanFail: the memory checks refuse a limit that a full
// budget does not fit under, a missing limit, a sidecar sized like a
// gateway, and a sidecar in the single topology with less than the budget
// it was measured to need, and accept the sidecar profiles.
func TestMemoryChecksCanFail(t *testing.T) {
	sidecar := config.Default()
	sidecar.MaxMemory = 32 << 20
	gateway := config.Default()
	single := func(c config.Config) config.Config {
		c.Topology = config.TopologySingle
		return c
	}
	withMemory := func(mib int64) config.Config {
		c := config.Default()
		c.MaxMemory = mib << 20
		return c
	}
	for _, c := range []struct {
		name    string
		problem string
		want    bool
	}{
		{"32MiB under 96Mi", memoryLimitProblem(96<<20, sidecar) + sidecarProblem(96<<20, sidecar), false},
		{"32MiB under 80Mi", memoryLimitProblem(80<<20, sidecar), true},
		{"no limit", memoryLimitProblem(0, sidecar), true},
		{"1GiB under 1536Mi", memoryLimitProblem(1536<<20, gateway), false},
		{"1GiB as a sidecar", sidecarProblem(1536<<20, gateway), true},
		{"32MiB as a sidecar under 128Mi", sidecarProblem(128<<20, sidecar), true},
		{"32MiB as a single sidecar under 96Mi", sidecarProblem(96<<20, single(sidecar)), true},
		{"48MiB as a single sidecar under 128Mi", sidecarProblem(128<<20, single(withMemory(48))), true},
		{"64MiB as a single sidecar under 128Mi", sidecarProblem(128<<20, single(withMemory(64))), false},
		{"128MiB as a single sidecar under 160Mi", sidecarProblem(160<<20, single(withMemory(128))), true},
		{"128MiB as a single sidecar under 256Mi", sidecarProblem(256<<20, single(withMemory(128))), false},
		{"256MiB as a single sidecar under 640Mi", sidecarProblem(640<<20, single(withMemory(256))), true},
		{"512MiB as a single sidecar under 576Mi", sidecarProblem(576<<20, single(withMemory(512))), false},
		{"512MiB as a single sidecar under 512Mi", sidecarProblem(512<<20, single(withMemory(512))), true},
		{"1GiB as a single sidecar under 1152Mi", sidecarProblem(1152<<20, single(gateway)), false},
	} {
		if got := c.problem != ""; got != c.want {
			t.Errorf("%s: problem %q, want one: %v", c.name, c.problem, c.want)
		}
	}
}

// TestStrictDecodingCatchesMisspellings: the check above can fail.
func TestStrictDecodingCatchesMisspellings(t *testing.T) {
	data, err := os.ReadFile("../kubernetes/sidecar/deployment.yaml")
	if err != nil {
		t.Fatal(err)
	}
	bad := strings.Replace(string(data), "readinessProbe:", "readynessProbe:", 1)
	if bad == string(data) {
		t.Fatal("the sidecar has no readinessProbe to misspell")
	}
	if _, err := decodeAll("misspelled", []byte(bad)); err == nil || !strings.Contains(err.Error(), "readynessProbe") {
		t.Fatalf("a misspelled field decoded: %v", err)
	}
}
