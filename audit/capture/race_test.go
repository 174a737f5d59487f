//go:build race

package capture_test

// raceEnabled: under the race detector sync.Pool drops items at random,
// so a pooled event's state is made anew now and then.
const raceEnabled = true
