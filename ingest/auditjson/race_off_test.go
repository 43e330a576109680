//go:build !race

package auditjson

// raceSlack is nothing without the race detector.
const raceSlack = 0
