package cli

import (
	"fmt"
	"io"

	"github.com/kube-sunset/sunset/store"
)

// WriteVerify prints what `sunset store verify` found in a data directory.
func WriteVerify(w io.Writer, r store.Report) {
	fmt.Fprintf(w, "data directory: %s\n", r.Dir)
	if r.Empty {
		fmt.Fprintln(w, "holds no store yet: serve creates one")
		return
	}
	if r.ManifestRead {
		levels := "levels"
		if r.Levels == 1 {
			levels = "level"
		}
		fmt.Fprintf(w, "tables: %d on %d %s, %.1f MiB\n", r.Tables, r.Levels, levels, float64(r.TableBytes)/(1<<20))
	}
	fmt.Fprintf(w, "logs: %d write-ahead, %d value\n", r.Logs, r.ValueLogs)
	for _, l := range r.Leftovers {
		fmt.Fprintf(w, "leftover: %s is not in the MANIFEST (a flush or compaction cut short); badger deletes it at the next start\n", l)
	}
	for _, l := range r.EmptyLogs {
		fmt.Fprintf(w, "empty: %s is 0 bytes (a crash came before badger sized it) and holds nothing; serve removes it at the next start\n", l)
	}
	for _, p := range r.Problems {
		fmt.Fprintf(w, "DAMAGED: %s\n", p)
	}
	if r.Healthy() {
		fmt.Fprintln(w, "healthy")
	}
}
