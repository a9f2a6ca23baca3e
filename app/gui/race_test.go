//go:build race

package gui

// raceDetector says the tests run with -race.
const raceDetector = true
