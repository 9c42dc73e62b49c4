//go:build !race

package apitest

// raceEnabled: see race_test.go.
const raceEnabled = false
