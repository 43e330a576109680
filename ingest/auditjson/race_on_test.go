//go:build race

package auditjson

// raceSlack is what the race detector adds to the allocations a decode
// makes (sync.Pool drops buffers at random under it, and its
// instrumentation allocates): measured at 9.4 MiB for a 60 MiB item.
const raceSlack = 12 << 20

// The array bombs are smaller under the race detector, which makes
// walking a list many times slower and finds nothing more in a longer
// one: each event is still over maxItemBytes, so every decoder takes the
// path it takes for a bomb of any size, and the full bombs' allocations
// are held to heapBudget without it (race_off_test.go).
const (
	// bombEntries: 3 Mi empty strings, 9 MiB of JSON.
	bombEntries = 3 << 20
	// bombMinBytes is what the sourceIPs bomb is at least.
	bombMinBytes = 9 << 20
	// bombListEntries scales TestArrayBombsInOtherLists' bombs, 9 to
	// 13 MiB each.
	bombListEntries = 3 << 20
	// bombWholeEntries scales the same bombs for the decoders that walk
	// the whole event, 3 to 4.4 MiB: the stream alone needs them over
	// maxItemBytes to take its path.
	bombWholeEntries = 1 << 20
)
