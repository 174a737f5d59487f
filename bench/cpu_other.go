//go:build !linux

package bench

import (
	"errors"
	"time"
)

// ProcessCPU reads the CPU time process pid has used; only Linux lets one
// process read another's.
func ProcessCPU(pid int) (time.Duration, error) {
	return 0, errors.New("bench: reading another process's CPU time needs Linux")
}
