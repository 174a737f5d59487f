package cmd

import (
	"os"
	"runtime/debug"

	"github.com/inorder-proxy/inorder/config"
)

// memoryHeadroom is what serve's process may use beyond max-memory: the
// runtime, goroutine stacks, listeners, TLS and metrics state.
const memoryHeadroom = 64 << 20

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
