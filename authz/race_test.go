//go:build race

package authz

// raceEnabled: the race detector changes what allocates.
const raceEnabled = true
