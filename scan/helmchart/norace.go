//go:build !race

package helmchart

// raceDetector is set in a binary built with -race.
const raceDetector = false
