//go:build !race

package auditjson

// raceSlack is nothing without the race detector.
const raceSlack = 0

const (
	// bombEntries is how many empty strings the array bomb's list holds:
	// 54 MiB of JSON, inside the webhook's 64 MiB body limit. Decoded
	// into a []string they took 1.2 GiB at peak.
	bombEntries = 18 << 20
	// bombMinBytes is what the sourceIPs bomb is at least.
	bombMinBytes = 50 << 20
	// bombListEntries scales TestArrayBombsInOtherLists' bombs, 18 to
	// 26 MiB each.
	bombListEntries = 6 << 20
	// bombWholeEntries scales the same bombs for the decoders that walk
	// the whole event.
	bombWholeEntries = bombListEntries
)
