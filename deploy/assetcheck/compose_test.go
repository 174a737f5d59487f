package deploy_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/compose-spec/compose-go/v2/cli"
)

// TestCompose loads the compose file with the compose specification's own
// loader (which validates it against the specification's schema), and
// checks that inorder's command is a configuration inorder accepts, in
// front of the Kafka service, published on the ports it serves.
func TestCompose(t *testing.T) {
	opts, err := cli.NewProjectOptions([]string{filepath.Join("..", "compose", "compose.yaml")},
		cli.WithName("inorder"), cli.WithWorkingDirectory(filepath.Join("..", "compose")))
	if err != nil {
		t.Fatal(err)
	}
	project, err := opts.LoadProject(context.Background())
	if err != nil {
		t.Fatalf("compose file does not load: %v", err)
	}
	proxy, ok := project.Services["inorder"]
	if !ok {
		t.Fatal("no inorder service")
	}
	if _, ok := project.Services["kafka"]; !ok {
		t.Fatal("no kafka service")
	}
	if _, ok := proxy.DependsOn["kafka"]; !ok {
		t.Error("inorder does not wait for kafka")
	}
	if len(proxy.Command) == 0 || proxy.Command[0] != "serve" {
		t.Fatalf("inorder command %v does not run serve", proxy.Command)
	}
	cfg := loadInorderConfig(t, "compose", "", proxy.Command[1:])
	if len(cfg.Upstreams) != 1 || !strings.HasPrefix(cfg.Upstreams[0], "kafka:") {
		t.Errorf("inorder's upstream %v is not the kafka service", cfg.Upstreams)
	}
	published := map[uint32]bool{}
	for _, p := range proxy.Ports {
		published[p.Target] = true
	}
	_, listen, _ := strings.Cut(cfg.Listen, ":")
	_, admin, _ := strings.Cut(cfg.AdminListen, ":")
	for what, port := range map[string]string{"bootstrap": listen, "node 1": itoa(cfg.NodePortBase + 1), "admin": admin} {
		if !published[uint32(atoi(t, port))] {
			t.Errorf("the %s port %s is not published", what, port)
		}
	}
	// A sidecar's profile: compose runs inorder beside one application.
	for _, p := range []string{memoryLimitProblem(int64(proxy.MemLimit), cfg), sidecarProblem(int64(proxy.MemLimit), cfg)} {
		if p != "" {
			t.Errorf("compose: inorder: %s", p)
		}
	}
	if proxy.User == "" || strings.HasPrefix(proxy.User, "0") || !proxy.ReadOnly {
		t.Errorf("inorder runs as user %q, read-only %v: want non-root and read-only", proxy.User, proxy.ReadOnly)
	}
}
