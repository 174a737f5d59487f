//go:build race

package main

// raceEnabled: the race detector slows this test's harness and embedded
// broker about tenfold on a small machine, which starves the proxy under
// test of CPU; the hostile-client test runs without it (.ci/run).
const raceEnabled = true
