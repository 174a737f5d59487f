package deploy_test

import (
	"bufio"
	"debug/elf"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// dockerfile is what the test reads from the Dockerfile.
type dockerfile struct {
	finalFrom string
	user      string
	build     string // the RUN line that runs go build
}

func readDockerfile(t *testing.T) dockerfile {
	t.Helper()
	f, err := os.Open(filepath.Join("..", "..", "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var d dockerfile
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		switch {
		case strings.HasPrefix(line, "FROM "):
			d.finalFrom = strings.Fields(line)[1]
			d.user = ""
		case strings.HasPrefix(line, "USER "):
			d.user = strings.TrimSpace(strings.TrimPrefix(line, "USER "))
		case strings.HasPrefix(line, "RUN ") && strings.Contains(line, "go build"):
			d.build = strings.TrimPrefix(line, "RUN ")
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return d
}

// TestDockerfileBuildsStaticNonRoot builds the binary with exactly the
// Dockerfile's build command (its environment, flags and package; the
// version build argument set), then checks it is a static executable, and
// that the image is empty (scratch) and runs as a non-root user.
func TestDockerfileBuildsStaticNonRoot(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	d := readDockerfile(t)
	if d.finalFrom != "scratch" {
		t.Errorf("the image is FROM %s, want scratch", d.finalFrom)
	}
	if d.user == "" || d.user == "0" || strings.HasPrefix(d.user, "0:") || d.user == "root" {
		t.Errorf("the image runs as %q, want a non-root user", d.user)
	}
	if d.build == "" {
		t.Fatal("the Dockerfile has no go build")
	}
	out := filepath.Join(t.TempDir(), "inorder")
	cmdline := strings.ReplaceAll(d.build, "${VERSION}", "v0.0.0-deploytest")
	cmdline = regexp.MustCompile(`-o \S+`).ReplaceAllString(cmdline, "-o "+out)
	cmd := exec.Command("sh", "-c", cmdline)
	cmd.Dir = filepath.Join("..", "..")
	cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", cmdline, err, b)
	}
	bin, err := elf.Open(out)
	if err != nil {
		t.Fatal(err)
	}
	defer bin.Close()
	for _, p := range bin.Progs {
		if p.Type == elf.PT_INTERP {
			t.Error("the binary asks for a dynamic loader: it would not start on an empty image")
		}
	}
	if libs, _ := bin.ImportedLibraries(); len(libs) > 0 {
		t.Errorf("the binary needs shared libraries %v", libs)
	}
	version, err := exec.Command(out, "version").Output()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(version), "v0.0.0-deploytest") {
		t.Errorf("version printed %q: the build's -X flag did not take", version)
	}
}
