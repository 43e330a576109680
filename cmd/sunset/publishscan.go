package main

import (
	"github.com/spf13/cobra"

	"github.com/kube-sunset/sunset/app"
)

// newPublishScanCommand is the cluster scan's own workload: it scans once
// and publishes the result for serve (scan.configMap), so that the pod
// taking the webhook needs no read on the cluster's Secrets.
func newPublishScanCommand(env console) *cobra.Command {
	var configFile string
	cmd := withHelp(&cobra.Command{
		Use:   "publish-scan",
		Short: "Scan this cluster once and publish the result in the ConfigMap serve reads (scan.configMap)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := app.LoadConfig(app.Flags(), configFile)
			if err != nil {
				return err
			}
			return app.PublishScan(cmd.Context(), cfg, env.stderr, env.isTerminal)
		},
	}, "publish-scan")
	cmd.Flags().StringVar(&configFile, "config", "", "serve's YAML config file, for scan.configMap, catalog.extra and field-rules")
	return cmd
}
