//go:build race

package auditjson

// raceSlack is what the race detector adds to the allocations a decode
// makes (sync.Pool drops buffers at random under it, and its
// instrumentation allocates): measured at 9.4 MiB for a 60 MiB item.
const raceSlack = 12 << 20
