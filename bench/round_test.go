package bench

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestBeforeRoundMeasuresThatRoundsProcess checks that BeforeRound runs
// before every round and that a process named by CPUPIDFiles is read as
// each window starts: in the round whose hook names an idle process, the
// path's CPU time is that process's, nothing, and in the others it is this
// process's, which runs the relay.
func TestBeforeRoundMeasuresThatRoundsProcess(t *testing.T) {
	relayed, err := NewRelayedBroker(BrokerConfig{Kind: Blackhole}, "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer relayed.Close()
	idle := exec.Command("sleep", "60")
	if err := idle.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = idle.Process.Kill(); _ = idle.Wait() }()

	pidFile := filepath.Join(t.TempDir(), "relay.pid")
	var rounds []int
	o := Default()
	o.Targets = []Target{{Name: "relay", Addr: relayed.Addr()}}
	o.Rounds = 3
	o.Records = 2000
	o.Warmup = 100 * time.Millisecond
	o.CPUPIDFiles = map[string]string{"relay": pidFile}
	o.BeforeRound = func(_ context.Context, round int) error {
		rounds = append(rounds, round)
		pid := os.Getpid()
		if round == 2 {
			pid = idle.Process.Pid
		}
		return os.WriteFile(pidFile, []byte(strconv.Itoa(pid)+"\n"), 0o600)
	}
	res, err := Run(context.Background(), o, nil)
	if err != nil {
		t.Fatal(err)
	}
	if want := []int{1, 2, 3}; !reflect.DeepEqual(rounds, want) {
		t.Fatalf("BeforeRound ran for rounds %v, want %v", rounds, want)
	}
	s := res.Targets[0].Rounds
	if s[0].CPU <= 0 || s[2].CPU <= 0 {
		t.Errorf("rounds 1 and 3 measured this process, which relays every record, as costing %v and %v", s[0].CPU, s[2].CPU)
	}
	if s[1].CPU != 0 {
		t.Errorf("round 2 measured the sleeping process as costing %v: its id was not read again", s[1].CPU)
	}
}

// TestCPUPIDFileErrors checks that a pid file naming no target is refused
// before the run and one without a process id ends it, naming the file.
func TestCPUPIDFileErrors(t *testing.T) {
	o := Default()
	o.Targets = []Target{{Name: "a", Addr: "127.0.0.1:1"}}
	o.CPUPIDFiles = map[string]string{"b": "/nonexistent"}
	if err := o.Validate(); err == nil || !strings.Contains(err.Error(), "CPUPIDFiles") {
		t.Fatalf("a pid file of no target: %v", err)
	}
	bad := filepath.Join(t.TempDir(), "a.pid")
	if err := os.WriteFile(bad, []byte("proxy\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	o.CPUPIDFiles = map[string]string{"a": bad}
	if _, err := o.pidOf("a"); err == nil || !strings.Contains(err.Error(), bad) {
		t.Fatalf("a pid file without an id: %v", err)
	}
	if pid, err := o.pidOf("c"); pid != 0 || err != nil {
		t.Fatalf("a target without a process: %d, %v", pid, err)
	}
}
