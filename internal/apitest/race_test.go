//go:build race

package apitest

// raceEnabled: this test binary was built with -race, so the README example is built with
// it too and reuses the packages the race build already compiled.
const raceEnabled = true
