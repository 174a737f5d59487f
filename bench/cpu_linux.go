package bench

import (
	"fmt"
	"time"

	"golang.org/x/sys/unix"
)

// ProcessCPU reads the CPU time process pid has used, all its threads
// together, those that have exited included, in nanoseconds: the clock
// the kernel keeps of the process's time on a CPU (clock_getcpuclockid(3)).
// /proc/PID/stat gives the same time in ticks of 10 ms, too coarse for a
// round that costs a proxy a few hundred milliseconds: two readings
// apart, each truncated to a tick, move a ratio of two such rounds by
// several percent.
func ProcessCPU(pid int) (time.Duration, error) {
	// Zero in the clock id means the calling process, and the id holds
	// 28 bits of pid.
	if pid <= 0 || pid >= 1<<28 {
		return 0, fmt.Errorf("bench: no CPU clock for process %d", pid)
	}
	var ts unix.Timespec
	if err := unix.ClockGettime(processCPUClock(pid), &ts); err != nil {
		return 0, fmt.Errorf("bench: CPU time of process %d: %w", pid, err)
	}
	return time.Duration(ts.Nano()), nil
}

// processCPUClock is the clock id of process pid's CPU time as the kernel
// encodes it (include/linux/posix-timers.h): the complement of the pid
// shifted past three bits, a per-process clock (bit 2 clear) of the
// scheduler's nanosecond runtime (CPUCLOCK_SCHED, 2).
func processCPUClock(pid int) int32 {
	const cpuclockSched = 2
	return int32(^pid<<3 | cpuclockSched)
}
