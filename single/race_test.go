//go:build race

package single_test

// raceEnabled: the race detector allocates on its own (see
// TestSplitCostCoversWhatSplitAllocates).
const raceEnabled = true
