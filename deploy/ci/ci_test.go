// Package ci holds the CI examples of deploy/ci (a GitHub Actions workflow
// and GitLab CI jobs) and the tests that parse them and run their inorder
// steps locally, on loopback, against in-process backends.
package ci

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"gopkg.in/yaml.v3"

	"github.com/inorder-proxy/inorder/check"
	"github.com/inorder-proxy/inorder/internal/hostile"
	"github.com/inorder-proxy/inorder/internal/junit"
)

// stepTimeout bounds each step or script run locally.
const stepTimeout = 2 * time.Minute

var (
	buildOnce sync.Once
	binDir    string
	buildErr  error
)

// inorderBin builds the inorder binary once per test run and returns the
// directory holding it, to put first on PATH.
func inorderBin(t testing.TB) string {
	t.Helper()
	buildOnce.Do(func() {
		binDir, buildErr = os.MkdirTemp("", "inorder-ci-bin")
		if buildErr != nil {
			return
		}
		out, err := exec.Command("go", "build", "-o", filepath.Join(binDir, "inorder"), "../../cmd/inorder").CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return binDir
}

func TestMain(m *testing.M) {
	code := m.Run()
	if binDir != "" {
		os.RemoveAll(binDir)
	}
	os.Exit(code)
}

type ghWorkflow struct {
	Jobs map[string]ghJob `yaml:"jobs"`
}

type ghJob struct {
	Env      map[string]string `yaml:"env"`
	Services map[string]any    `yaml:"services"`
	Steps    []ghStep          `yaml:"steps"`
}

type ghStep struct {
	ID   string `yaml:"id"`
	Name string `yaml:"name"`
	Uses string `yaml:"uses"`
	Run  string `yaml:"run"`
	If   string `yaml:"if"`
}

func readGitHub(t *testing.T) ghWorkflow {
	t.Helper()
	raw, err := os.ReadFile("github-actions.yml")
	if err != nil {
		t.Fatal(err)
	}
	var w ghWorkflow
	if err := yaml.Unmarshal(raw, &w); err != nil {
		t.Fatalf("github-actions.yml: %v", err)
	}
	return w
}

// glJob is a GitLab job; script lines keep their comments, which mark the
// project's own tests.
type glJob struct {
	Extends   string            `yaml:"extends"`
	Variables map[string]string `yaml:"variables"`
	Script    yaml.Node         `yaml:"script"`
	Artifacts struct {
		When    string            `yaml:"when"`
		Reports map[string]string `yaml:"reports"`
	} `yaml:"artifacts"`
}

// yourTests marks a script line that stands for the project's own tests.
const yourTests = "# your tests"

func (j glJob) lines() (lines []string, marked []bool) {
	for _, n := range j.Script.Content {
		lines = append(lines, n.Value)
		marked = append(marked, strings.TrimSpace(n.LineComment) == yourTests)
	}
	return lines, marked
}

func readGitLab(t *testing.T) map[string]glJob {
	t.Helper()
	raw, err := os.ReadFile("gitlab-ci.yml")
	if err != nil {
		t.Fatal(err)
	}
	var jobs map[string]glJob
	if err := yaml.Unmarshal(raw, &jobs); err != nil {
		t.Fatalf("gitlab-ci.yml: %v", err)
	}
	return jobs
}

// TestWorkflowsSayWhatTheGuideSays parses both files and checks that each
// job does what deploy/ci/README.md says it does.
func TestWorkflowsSayWhatTheGuideSays(t *testing.T) {
	gh := readGitHub(t)
	for job, want := range map[string][]string{
		"dev-broker": {"inorder dev --listen"},
		"verify":     {"inorder serve", "--verify", "--report inorder-verify.xml", "--fail-on-violation", "exit \"$(cat inorder.exit)\""},
		"gate":       {"inorder check --bootstrap", "--format junit >inorder-check.xml"},
	} {
		j, ok := gh.Jobs[job]
		if !ok {
			t.Fatalf("github-actions.yml has no job %q", job)
		}
		var all strings.Builder
		for _, s := range j.Steps {
			all.WriteString(s.Run)
			if (s.ID == "stop" || s.ID == "report") && s.If != "always()" {
				t.Errorf("%s: step %s must run even when the tests failed (if: always())", job, s.ID)
			}
		}
		for _, w := range want {
			if !strings.Contains(all.String(), w) {
				t.Errorf("%s: no step runs %q", job, w)
			}
		}
	}
	gl := readGitLab(t)
	for job, want := range map[string][]string{
		"inorder-dev-broker": {"inorder dev --listen"},
		"inorder-verify":     {"inorder serve", "--verify", "--report inorder-verify.xml", "--fail-on-violation", "wait \"$inorder_pid\""},
		"inorder-gate":       {"inorder check --bootstrap", "--format junit >inorder-check.xml"},
	} {
		j, ok := gl[job]
		if !ok {
			t.Fatalf("gitlab-ci.yml has no job %q", job)
		}
		lines, _ := j.lines()
		script := strings.Join(lines, "\n")
		for _, w := range want {
			if !strings.Contains(script, w) {
				t.Errorf("%s: no script line runs %q", job, w)
			}
		}
		if job != "inorder-dev-broker" {
			for _, f := range j.Artifacts.Reports {
				if !strings.Contains(script, ">"+f) && !strings.Contains(script, "--report "+f) {
					t.Errorf("%s: reports %s, which no line writes", job, f)
				}
			}
			if j.Artifacts.When != "always" {
				t.Errorf("%s: the report must be kept when the job fails (when: always)", job)
			}
		}
	}
}

// backends are the upstreams the jobs are run against locally.
type backend struct {
	name     string
	addr     string
	reorders bool
}

func backends(t *testing.T) []backend {
	t.Helper()
	kc, err := kfake.NewCluster(kfake.NumBrokers(1))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(kc.Close)
	r, err := hostile.NewReorderer(hostile.ReordererConfig{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	return []backend{
		{name: "kfake", addr: kc.ListenAddrs()[0]},
		{name: "reorderer", addr: r.Addr(), reorders: true},
	}
}

// workload stands for a project's tests: the ordering check, pipelined,
// through addr. Against a backend that keeps order it must hold.
func workload(t *testing.T, addr string, mustHold bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), stepTimeout)
	defer cancel()
	rep, err := check.Run(ctx, check.Options{Bootstrap: addr, Requests: 200})
	if err != nil {
		t.Fatalf("workload through %s: %v", addr, err)
	}
	if mustHold && rep.Violations() != 0 {
		t.Fatalf("workload through %s saw %d violations", addr, rep.Violations())
	}
}

// shell runs script with bash as a CI runner would (errexit, pipefail) in
// dir, with env on top of the test's environment and inorder first on
// PATH, and returns its exit status.
func shell(t *testing.T, dir, script string, env map[string]string) (int, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), stepTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "--noprofile", "--norc", "-eo", "pipefail", "-c", script)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "PATH="+inorderBin(t)+string(os.PathListSeparator)+os.Getenv("PATH"))
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	// A background inorder keeps the output pipe open after bash ends.
	cmd.WaitDelay = time.Second
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case err == nil:
		return 0, out.String()
	case errors.As(err, &ee) && ee.ExitCode() >= 0:
		return ee.ExitCode(), out.String()
	}
	t.Fatalf("running %q: %v\n%s", script, err, out.String())
	return -1, ""
}

// readEnvFile reads a GITHUB_ENV file: NAME=value lines.
func readEnvFile(t *testing.T, path string) map[string]string {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	env := map[string]string{}
	for _, line := range strings.Split(string(raw), "\n") {
		if k, v, ok := strings.Cut(line, "="); ok {
			env[k] = v
		}
	}
	return env
}

// runGitHubJob runs a job's steps as a runner would: steps that install
// (uses:, id install) are skipped, the step with id tests is replaced by
// the workload, a step after a failure runs only with if: always(), and
// GITHUB_ENV carries variables from step to step. It returns each step's
// exit status by id.
func runGitHubJob(t *testing.T, job ghJob, overrides map[string]string, mustHold bool) (string, map[string]int) {
	t.Helper()
	dir := t.TempDir()
	// A job cut short leaves inorder running in the background, as on a
	// runner until the job's end; here the test ends it.
	t.Cleanup(func() {
		if pid, err := os.ReadFile(filepath.Join(dir, "inorder.pid")); err == nil {
			exec.Command("kill", strings.TrimSpace(string(pid))).Run()
		}
	})
	envFile := filepath.Join(dir, "github-env")
	status := map[string]int{}
	failed := false
	for _, s := range job.Steps {
		if s.Uses != "" || s.ID == "install" || (failed && s.If != "always()") {
			continue
		}
		env := map[string]string{"GITHUB_ENV": envFile}
		for k, v := range job.Env {
			env[k] = v
		}
		for k, v := range overrides {
			env[k] = v
		}
		for k, v := range readEnvFile(t, envFile) {
			env[k] = v
		}
		if s.ID == "tests" {
			workload(t, env["KAFKA_BOOTSTRAP"], mustHold)
			status[s.ID] = 0
			continue
		}
		code, out := shell(t, dir, s.Run, env)
		status[s.ID] = code
		if code != 0 {
			failed = true
			log, _ := os.ReadFile(filepath.Join(dir, "inorder.log"))
			t.Logf("step %s exited %d:\n%s\ninorder.log:\n%s", s.ID, code, out, log)
		}
	}
	return dir, status
}

// exit returns the status a job must end with against b: code when b
// breaks order, 0 when it keeps it.
func (b backend) exit(code int) int {
	if b.reorders {
		return code
	}
	return 0
}

// requireReport reads the JUnit report at path, which must show failures
// exactly when b breaks order.
func (b backend) requireReport(t *testing.T, path string) junit.Suite {
	t.Helper()
	rep := readJUnit(t, path)
	if (rep.Failures > 0) != b.reorders {
		t.Fatalf("%s: %d failures against %s", filepath.Base(path), rep.Failures, b.name)
	}
	return rep
}

func readJUnit(t *testing.T, path string) junit.Suite {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	s, err := junit.Read(raw)
	if err != nil {
		t.Fatalf("%s: %v\n%s", path, err, raw)
	}
	return s
}

// TestGitHubActionsJobsRunLocally runs the workflow's jobs on loopback:
// dev as the broker; serve --verify in front of a backend that keeps
// order and one that does not; the check as a gate against both.
func TestGitHubActionsJobsRunLocally(t *testing.T) {
	gh := readGitHub(t)
	t.Run("dev-broker", func(t *testing.T) {
		_, status := runGitHubJob(t, gh.Jobs["dev-broker"], map[string]string{"INORDER_LISTEN": "127.0.0.1:0"}, true)
		if status["start"] != 0 || status["stop"] != 0 {
			t.Fatalf("step exit statuses %v", status)
		}
	})
	for _, b := range backends(t) {
		t.Run("verify/"+b.name, func(t *testing.T) {
			dir, status := runGitHubJob(t, gh.Jobs["verify"], map[string]string{"INORDER_LISTEN": "127.0.0.1:0", "UPSTREAM": b.addr}, !b.reorders)
			if status["start"] != 0 || status["stop"] != b.exit(3) {
				t.Fatalf("step exit statuses %v, want stop to exit %d", status, b.exit(3))
			}
			b.requireReport(t, filepath.Join(dir, "inorder-verify.xml"))
		})
		t.Run("gate/"+b.name, func(t *testing.T) {
			dir, status := runGitHubJob(t, gh.Jobs["gate"], map[string]string{"BROKER": b.addr}, false)
			if status["check"] != b.exit(1) {
				t.Fatalf("check step exited %d, want %d", status["check"], b.exit(1))
			}
			if rep := b.requireReport(t, filepath.Join(dir, "inorder-check.xml")); rep.Tests != len(check.PropertyNames()) {
				t.Fatalf("check report: %d tests", rep.Tests)
			}
		})
	}
}

// runGitLabJob runs a job's script in one shell, as GitLab does; the line
// marked "# your tests" hands the address to the test, which runs the
// workload and lets the script go on.
func runGitLabJob(t *testing.T, job glJob, overrides map[string]string, mustHold bool) (string, int) {
	t.Helper()
	dir := t.TempDir()
	lines, marked := job.lines()
	var script strings.Builder
	// A script cut short leaves inorder running in the background, as on
	// a runner until the job's end; here the shell ends it.
	script.WriteString("trap 'kill $(jobs -p) 2>/dev/null || true' EXIT\n")
	for i, l := range lines {
		if marked[i] {
			l = `echo "$KAFKA_BOOTSTRAP" >workload.addr; until [ -e workload.done ]; do sleep 0.05; done`
		}
		script.WriteString(l + "\n")
	}
	env := map[string]string{}
	for k, v := range job.Variables {
		env[k] = v
	}
	for k, v := range overrides {
		env[k] = v
	}
	type result struct {
		code int
		out  string
	}
	done := make(chan result, 1)
	go func() {
		code, out := shell(t, dir, script.String(), env)
		done <- result{code, out}
	}()
	addrFile := filepath.Join(dir, "workload.addr")
	for {
		select {
		case r := <-done:
			if r.code != 0 {
				t.Logf("script exited %d:\n%s", r.code, r.out)
			}
			return dir, r.code
		case <-time.After(20 * time.Millisecond):
		}
		raw, err := os.ReadFile(addrFile)
		if err != nil || !bytes.HasSuffix(raw, []byte("\n")) {
			continue
		}
		workload(t, strings.TrimSpace(string(raw)), mustHold)
		os.Remove(addrFile)
		if err := os.WriteFile(filepath.Join(dir, "workload.done"), nil, 0o600); err != nil {
			t.Fatal(err)
		}
	}
}

// TestGitLabJobsRunLocally runs the GitLab jobs as the GitHub test does.
func TestGitLabJobsRunLocally(t *testing.T) {
	gl := readGitLab(t)
	t.Run("dev-broker", func(t *testing.T) {
		if _, code := runGitLabJob(t, gl["inorder-dev-broker"], map[string]string{"INORDER_LISTEN": "127.0.0.1:0"}, true); code != 0 {
			t.Fatalf("exit status %d", code)
		}
	})
	for _, b := range backends(t) {
		t.Run("verify/"+b.name, func(t *testing.T) {
			dir, code := runGitLabJob(t, gl["inorder-verify"], map[string]string{"INORDER_LISTEN": "127.0.0.1:0", "UPSTREAM": b.addr}, !b.reorders)
			if code != b.exit(3) {
				t.Fatalf("exit status %d, want %d", code, b.exit(3))
			}
			b.requireReport(t, filepath.Join(dir, "inorder-verify.xml"))
		})
		t.Run("gate/"+b.name, func(t *testing.T) {
			dir, code := runGitLabJob(t, gl["inorder-gate"], map[string]string{"BROKER": b.addr}, false)
			if code != b.exit(1) {
				t.Fatalf("exit status %d, want %d", code, b.exit(1))
			}
			b.requireReport(t, filepath.Join(dir, "inorder-check.xml"))
		})
	}
}
