package cli

import (
	"errors"
	"fmt"
	"io"

	"github.com/kube-sunset/sunset/store"
)

// writeVerify prints what `sunset store verify` found in a data directory.
func writeVerify(w io.Writer, r store.Report) {
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

// Exit codes of `sunset store verify`.
const (
	exitVerifyHealthy = 0
	exitVerifyFailed  = 1
	exitVerifyDamaged = 2
)

// Verify is `sunset store verify`: it checks dataDir (every block's
// checksum unless quick) and prints what it found. A failed or damaging
// verdict is an ExitCodeError.
func Verify(dataDir string, quick bool, out Output) error {
	r, err := store.Verify(dataDir, !quick)
	if err != nil {
		fmt.Fprintln(out.Err, "Error:", err)
		return &ExitCodeError{Code: exitVerifyFailed, Err: err}
	}
	writeVerify(out.Out, r)
	if !r.Healthy() {
		fmt.Fprintf(out.Err, "Error: %s is damaged; keep a copy of it and see \"Recovering a damaged store\" in docs/operations.md\n", dataDir)
		return &ExitCodeError{Code: exitVerifyDamaged, Err: errors.New("damaged")}
	}
	return nil
}
