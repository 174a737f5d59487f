//go:build !race

package single_test

const raceEnabled = false
