package cmd

import (
	"os"
	"runtime/debug"

	"github.com/inorder-proxy/inorder/config"
)

// memoryHeadroom is what the runtime's soft limit allows serve's heap
// beyond max-memory: goroutine stacks, connection state, listeners, TLS
// and metrics state, and garbage not yet collected. It is half of what
// resident memory may exceed max-memory by (README's 64 MiB): the soft
// limit is a target the runtime can overshoot while it collects, and the
// binary's code is resident too without being in the runtime's count. It
// does not shrink with a small budget (16MiB is the smallest), because
// what it covers does not: the process is 16 MiB resident before any
// client, and a limit nearer the budget would make the collector run
// nearly without pause whenever the budget is full (DESIGN.md, bounds).
const memoryHeadroom = 32 << 20

// setMemoryLimit asks the garbage collector to keep the heap under
// max-memory plus memoryHeadroom. The budget bounds what the proxy holds;
// without a limit Go lets the heap grow to twice what is live before it
// collects, and memory the budget released would still be resident. A
// GOMEMLIMIT set in the environment wins. dev does not call it: its
// embedded broker shares the process and holds data of its own.
func setMemoryLimit(cfg config.Config) {
	if os.Getenv("GOMEMLIMIT") != "" {
		return
	}
	debug.SetMemoryLimit(cfg.Memory() + memoryHeadroom)
}
