package main

import (
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/kube-sunset/sunset/report"
	"github.com/kube-sunset/sunset/store"
)

// Exit codes of sunset store verify.
const (
	exitVerifyHealthy = 0
	exitVerifyFailed  = 1
	exitVerifyDamaged = 2
)

func newStoreCommand(env cli) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "store",
		Short: "Look after a data directory",
		Args:  cobra.NoArgs,
	}
	cmd.AddCommand(newStoreVerifyCommand(env))
	return cmd
}

func newStoreVerifyCommand(env cli) *cobra.Command {
	var dataDir string
	var quick bool
	cmd := &cobra.Command{
		Use:   "verify",
		Short: "Check a data directory for damage, without changing it",
		Long: `Verify checks a data directory the way serve does before it opens it, and
more: the MANIFEST, every table it lists (every block's checksum, unless
--quick), and the write-ahead and value logs. It changes nothing. Stop the
server first: a running server holds the directory.

Exit codes:
  0  the directory is healthy (or holds no store yet)
  1  the check could not run: no such directory, a server holds it, no access
  2  the directory is damaged; see "Recovering a damaged store" in the README`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			r, err := store.Verify(dataDir, !quick)
			if err != nil {
				fmt.Fprintln(env.stderr, "Error:", err)
				return &exitError{code: exitVerifyFailed, err: err}
			}
			report.WriteVerify(env.stdout, r)
			if !r.Healthy() {
				fmt.Fprintf(env.stderr, "Error: %s is damaged; keep a copy of it and see \"Recovering a damaged store\" in the README\n", dataDir)
				return &exitError{code: exitVerifyDamaged, err: errors.New("damaged")}
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&dataDir, "data-dir", "./sunset-data", "the data directory to check")
	cmd.Flags().BoolVar(&quick, "quick", false, "read only the tables' indexes and end blocks, as serve does at startup")
	return cmd
}
