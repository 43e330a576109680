//go:build race

package scan

// raceEnabled is whether the race detector instruments the test binary,
// which makes decoding megabytes of records some ten times slower.
const raceEnabled = true
