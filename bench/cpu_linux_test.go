package bench

import (
	"bufio"
	"os"
	"os/exec"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// spinEnv makes the test binary, run as a child, spin for this much of its
// own CPU time, print a line and wait for its standard input to close.
const spinEnv = "INORDER_BENCH_SPIN_CPU"

func TestMain(m *testing.M) {
	if s := os.Getenv(spinEnv); s != "" {
		spin(s)
		return
	}
	os.Exit(m.Run())
}

func spin(s string) {
	d, err := time.ParseDuration(s)
	if err != nil {
		os.Exit(2)
	}
	for {
		var ts unix.Timespec
		if err := unix.ClockGettime(unix.CLOCK_PROCESS_CPUTIME_ID, &ts); err != nil {
			os.Exit(3)
		}
		if time.Duration(ts.Nano()) >= d {
			break
		}
	}
	os.Stdout.WriteString("spun\n")
	_, _ = bufio.NewReader(os.Stdin).ReadString('\n')
}

// TestProcessCPUReadsAnotherProcess checks that ProcessCPU reads a child's
// CPU time, threads and all, to well under the 10 ms tick of /proc/PID/stat:
// a child that has spun for a known CPU time reads at least that and not
// much more, and the reading does not go back.
func TestProcessCPUReadsAnotherProcess(t *testing.T) {
	const want = 300 * time.Millisecond
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), spinEnv+"="+want.String())
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		in.Close()
		_ = cmd.Wait()
	}()
	line := make(chan string, 1)
	go func() {
		s, _ := bufio.NewReader(out).ReadString('\n')
		line <- s
	}()
	select {
	case s := <-line:
		if s != "spun\n" {
			t.Fatalf("child said %q, want spun", s)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("the child did not spin its CPU time within 60s")
	}
	pid := cmd.Process.Pid
	got, err := ProcessCPU(pid)
	if err != nil {
		t.Fatal(err)
	}
	// The child's runtime starts, and its other threads run, besides the
	// spinning one: a little more than want, never less.
	if got < want || got > want+200*time.Millisecond {
		t.Fatalf("child's CPU time %v, want %v to %v", got, want, want+200*time.Millisecond)
	}
	again, err := ProcessCPU(pid)
	if err != nil {
		t.Fatal(err)
	}
	if again < got {
		t.Fatalf("CPU time went back from %v to %v", got, again)
	}
	// The waiting child uses next to no CPU: two readings of ticks would
	// be equal; these are the kernel's nanoseconds, so at least one of
	// these readings of a running process is off the 10 ms grid.
	self0, err := ProcessCPU(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	var self1 time.Duration
	for i := 0; i < 3; i++ {
		if self1, err = ProcessCPU(os.Getpid()); err != nil {
			t.Fatal(err)
		}
	}
	if self1 <= self0 {
		t.Fatalf("this process's CPU time went from %v to %v while it ran", self0, self1)
	}
	if got%(10*time.Millisecond) == 0 && self0%(10*time.Millisecond) == 0 && self1%(10*time.Millisecond) == 0 {
		t.Fatalf("readings %v, %v, %v all fall on whole ticks: not nanoseconds", got, self0, self1)
	}
}

// TestProcessCPUOfNoProcess checks that a process that does not exist is
// an error, not a CPU time of zero.
func TestProcessCPUOfNoProcess(t *testing.T) {
	// Above PID_MAX_LIMIT, and above what a clock id holds, which would
	// wrap around to this process's own clock.
	for _, pid := range []int{1<<22 + 1, 1 << 30} {
		if _, err := ProcessCPU(pid); err == nil {
			t.Fatalf("no error for process %d, beyond any the kernel hands out", pid)
		}
	}
	if _, err := ProcessCPU(0); err == nil {
		t.Fatal("no error for process 0")
	}
}
