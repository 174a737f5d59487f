package cmd

import (
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"
)

// waitText polls buf until it holds want, or fails after 10 seconds.
func waitText(t *testing.T, buf *syncBuffer, want string) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if strings.Contains(buf.String(), want) {
			return
		}
	}
	t.Fatalf("never logged %q; log:\n%s", want, buf.String())
}

// surviveSIGHUP keeps the test process alive through a SIGHUP sent
// before the reloader listens for it.
func surviveSIGHUP(t *testing.T) {
	keep := make(chan os.Signal, 1)
	signal.Notify(keep, syscall.SIGHUP)
	t.Cleanup(func() { signal.Stop(keep) })
}

// replaceFile writes content next to path and renames it into place, as
// editors do.
func replaceFile(t *testing.T, path, content string) {
	t.Helper()
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// configMap lays out a directory as a Kubernetes ConfigMap mount does:
// name is a symlink to ..data/name, and ..data a symlink to a versioned
// directory that an update replaces by swapping ..data.
type configMap struct {
	dir, name string
	version   int
}

func (m *configMap) path() string { return filepath.Join(m.dir, m.name) }

func (m *configMap) write(t *testing.T, content string) {
	t.Helper()
	m.version++
	v := fmt.Sprintf("..v%d", m.version)
	if err := os.Mkdir(filepath.Join(m.dir, v), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(m.dir, v, m.name), []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	tmp := filepath.Join(m.dir, "..data_tmp")
	if err := os.Symlink(v, tmp); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(m.dir, "..data")); err != nil {
		t.Fatal(err)
	}
	if m.version == 1 {
		if err := os.Symlink(filepath.Join("..data", m.name), m.path()); err != nil {
			t.Fatal(err)
		}
	}
}

// TestReloadFromFileAndSIGHUP runs serve with a ConfigMap-style --config
// and changes it the ways an operator does: a valid change applies (and is
// counted), a listen address is refused with a log line naming it, an
// invalid file keeps the running configuration and names the field and
// value, and SIGHUP re-reads the file.
func TestReloadFromFileAndSIGHUP(t *testing.T) {
	surviveSIGHUP(t)
	kc := newBroker(t)
	m := &configMap{dir: t.TempDir(), name: "inorder.yaml"}
	base := fmt.Sprintf("upstream: %s\nadmin-listen: 127.0.0.1:0\n", kc.ListenAddrs()[0])
	m.write(t, base+"listen: 127.0.0.1:0\nmax-in-flight: 100\n")

	_, out, errOut, stop := startStreams(t, "serve", "--config", m.path())
	defer stop()
	admin := regexp.MustCompile(`admin endpoint at (http://\S+) `).FindStringSubmatch(out.String())
	if admin == nil {
		t.Fatalf("no admin endpoint printed:\n%s", out.String())
	}
	reloads := func(result string) string {
		_, body := httpGet(t, admin[1]+"/metrics")
		re := regexp.MustCompile(`inorder_config_reloads_total\{result="` + result + `"\} (\d+)`)
		if m := re.FindStringSubmatch(body); m != nil {
			return m[1]
		}
		return "absent"
	}

	m.write(t, base+"listen: 127.0.0.1:0\nmax-in-flight: 7\nlog-level: debug\n")
	waitText(t, errOut, "configuration reloaded")
	if !strings.Contains(errOut.String(), `applied="[log-level max-in-flight]"`) {
		t.Errorf("the reload does not say what it applied:\n%s", errOut.String())
	}
	if got := reloads("success"); got != "1" {
		t.Errorf("successful reloads = %s, want 1", got)
	}

	m.write(t, base+"listen: 127.0.0.1:0\nupstream-ordering: sideways\n")
	waitText(t, errOut, "configuration not reloaded")
	if !strings.Contains(errOut.String(), "upstream-ordering") || !strings.Contains(errOut.String(), "sideways") {
		t.Errorf("the failed reload does not name the field and value:\n%s", errOut.String())
	}
	if got := reloads("failure"); got != "1" {
		t.Errorf("failed reloads = %s, want 1", got)
	}

	// An editor's rename into place (over the ConfigMap's symlink).
	replaceFile(t, m.path(), base+"listen: 127.0.0.1:1\nmax-in-flight: 9\n")
	waitText(t, errOut, "setting needs a restart")
	if !strings.Contains(errOut.String(), `setting=listen running=127.0.0.1:0 new=127.0.0.1:1`) {
		t.Errorf("the refusal does not name the setting and both values:\n%s", errOut.String())
	}
	waitText(t, errOut, "refused=[listen]")
	if got := reloads("partial"); got != "1" {
		t.Errorf("partial reloads = %s, want 1", got)
	}

	if err := syscall.Kill(os.Getpid(), syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	waitText(t, errOut, "trigger=SIGHUP")
	if got := reloads("partial"); got != "2" {
		t.Errorf("partial reloads after SIGHUP = %s, want 2 (the listen address still differs)", got)
	}
}

// TestReloadBackToStartupFile: a SIGHUP applies a change the watch did not
// see (the file is a symlink to a link in a directory that is not watched,
// swapped there to another file); the file written back to its content at
// start is then a change, and is applied, since the comparison is with
// what was last applied, not with the file as it was last read.
func TestReloadBackToStartupFile(t *testing.T) {
	surviveSIGHUP(t)
	kc := newBroker(t)
	watched, elsewhere := t.TempDir(), t.TempDir()
	startup := fmt.Sprintf("upstream: %s\nlisten: 127.0.0.1:0\nmax-in-flight: 100\n", kc.ListenAddrs()[0])
	for name, content := range map[string]string{"v1.yaml": startup, "v2.yaml": strings.Replace(startup, "100", "7", 1)} {
		if err := os.WriteFile(filepath.Join(elsewhere, name), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	real := filepath.Join(elsewhere, "inorder.yaml")
	if err := os.Symlink("v1.yaml", real); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(watched, "inorder.yaml")
	if err := os.Symlink(real, path); err != nil {
		t.Fatal(err)
	}
	_, _, errOut, stop := startStreams(t, "serve", "--config", path)
	defer stop()

	if err := os.Symlink("v2.yaml", real+".tmp"); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(real+".tmp", real); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(os.Getpid(), syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	waitText(t, errOut, `trigger=SIGHUP applied=[max-in-flight]`)

	replaceFile(t, path, startup)
	waitText(t, errOut, `trigger="file changed" applied=[max-in-flight]`)
}

// TestReloadToQuieterLevelIsLogged: a reload that raises log-level to warn
// still logs that it happened, and the level applies to what follows; one
// that lowers it logs under the new level.
func TestReloadToQuieterLevelIsLogged(t *testing.T) {
	kc := newBroker(t)
	path := filepath.Join(t.TempDir(), "inorder.yaml")
	base := fmt.Sprintf("upstream: %s\nlisten: 127.0.0.1:0\n", kc.ListenAddrs()[0])
	if err := os.WriteFile(path, []byte(base+"log-level: error\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	out, errOut, stop, wait := runCommand(t, "serve", "--config", path)
	waitText(t, out, "clients connect to")

	replaceFile(t, path, base+"log-level: info\n")
	waitText(t, errOut, `applied=[log-level]`)
	replaceFile(t, path, base+"log-level: warn\nmax-in-flight: 9\n")
	waitText(t, errOut, `applied="[log-level max-in-flight]"`)
	stop()
	if err := wait(30 * time.Second); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(errOut.String(), "msg=stopped") {
		t.Errorf("an INFO line was logged after the reload to warn:\n%s", errOut.String())
	}
}

// TestReloadQuotas: a change to the quotas list is applied by a reload,
// with no restart; a fault in it keeps the running configuration and
// names its line.
func TestReloadQuotas(t *testing.T) {
	kc := newBroker(t)
	path := filepath.Join(t.TempDir(), "inorder.yaml")
	base := fmt.Sprintf("upstream: %s\nlisten: 127.0.0.1:0\nadmin-listen: \"\"\n", kc.ListenAddrs()[0])
	if err := os.WriteFile(path, []byte(base), 0o600); err != nil {
		t.Fatal(err)
	}
	_, _, errOut, stop := startStreams(t, "serve", "--config", path)
	defer stop()
	replaceFile(t, path, base+"quotas:\n  - user: <default>\n    producer_byte_rate: 1048576\n")
	waitText(t, errOut, "applied=[quotas]")
	if strings.Contains(errOut.String(), "setting needs a restart") {
		t.Errorf("a change to the quotas was refused:\n%s", errOut.String())
	}
	replaceFile(t, path, base+"quotas:\n  - user: <default>\n    producer_byte_rate: lots\n")
	// slog's text handler quotes the error, escaping its quotes.
	waitText(t, errOut, path+`:6: quotas: producer_byte_rate \"lots\" is not a positive whole number`)
}
