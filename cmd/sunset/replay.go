package main

import (
	"github.com/spf13/cobra"

	"github.com/kube-sunset/sunset/cli/replay"
)

func newReplayCommand(env console) *cobra.Command {
	var o replay.Options
	cmd := withHelp(&cobra.Command{
		Use:   "replay FILE...",
		Short: "Import audit log files (JSON lines, gzip, directories, - for stdin)",
		Args:  cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			o.Inputs, o.Stdin, o.Stdout, o.Stderr = args, env.stdin, cmd.OutOrStdout(), cmd.ErrOrStderr()
			o.Terminal, o.Now = env.isTerminal, env.now
			return replay.Run(cmd.Context(), o)
		},
	}, "replay")
	o.Source.AddFlags(cmd.Flags())
	cmd.Flags().StringVar(&o.Node, "node", "replay", "the apiserver that wrote the files")
	cmd.Flags().StringVar(&o.Cluster, "cluster", "default", "the cluster of that apiserver")
	cmd.Flags().StringVar(&o.DryRun, "dry-run", replay.DryRunNone, "none, client or server")
	cmd.Flags().BoolVar(&o.ShiftToNow, "shift-to-now", false, "move timestamps by whole hours so the newest event falls in the current hour")
	return cmd
}
