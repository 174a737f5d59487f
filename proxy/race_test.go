//go:build race

package proxy_test

// raceEnabled: the race detector changes what allocates (see
// TestLargeFramesAllocateNothing).
const raceEnabled = true
