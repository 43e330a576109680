package main

import (
	"github.com/spf13/cobra"

	"github.com/kube-sunset/sunset/replay"
)

func newReplayCommand(env cli) *cobra.Command {
	var o replay.Options
	cmd := &cobra.Command{
		Use:   "replay FILE...",
		Short: "Import audit log files (JSON lines, gzip, directories, - for stdin)",
		Long: `Replay imports audit log files as kube-apiserver writes them with
--audit-log-path: one JSON event per line, plain or gzip-compressed, any line
length. Directories are read in name order; - reads standard input.

Events are counted exactly as the webhook counts them, with the same dedupe:
replaying a file twice counts nothing new. --node and --cluster say which
apiserver wrote the files.

It writes to a data directory (--data-dir, default ./sunset-data, which no
server may hold) or to a running server (--server, through its webhook).

--shift-to-now moves every timestamp by whole hours so that the newest event
falls in the current hour, keeping the gaps between events: a captured log
then shows as recent traffic. Each hour keeps its count; the newest events
may lie up to an hour ahead of the clock. auditIDs stay, so shifted events
are duplicates of the same events replayed unshifted, and the other way
round. The inputs are read twice (standard input is kept in a temporary
file).

--dry-run follows kubectl and the Kubernetes dry-run KEP:
  none    import (the default)
  client  parse and classify locally, print what would be counted
  server  send to --server with dryRun=All: the server classifies, checks
          duplicates against what it has, stores nothing`,
		Example: `  sunset replay /var/log/kubernetes/audit/ --node master-0
  sunset replay audit.log.1.gz audit.log --server http://sunset:8080 --cluster prod --node master-1
  zcat audit-*.gz | sunset replay - --node master-0 --dry-run=client
  sunset replay --shift-to-now testdata/apiserver-v1.36/webhook-metadata-batch/audit-log-file.jsonl --node master-0`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			o.Inputs, o.Stdin, o.Stdout, o.Stderr = args, env.stdin, cmd.OutOrStdout(), cmd.ErrOrStderr()
			o.Terminal, o.Now = env.isTerminal, env.now
			return replay.Run(cmd.Context(), o)
		},
	}
	o.Source.AddFlags(cmd.Flags())
	cmd.Flags().StringVar(&o.Node, "node", "replay", "the apiserver that wrote the files")
	cmd.Flags().StringVar(&o.Cluster, "cluster", "default", "the cluster of that apiserver")
	cmd.Flags().StringVar(&o.DryRun, "dry-run", replay.DryRunNone, "none, client or server")
	cmd.Flags().BoolVar(&o.ShiftToNow, "shift-to-now", false, "move timestamps by whole hours so the newest event falls in the current hour")
	return cmd
}
