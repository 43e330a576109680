package main

import (
	"github.com/spf13/cobra"

	"github.com/kube-sunset/sunset/app"
	"github.com/kube-sunset/sunset/config"
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
			cfg, err := config.Load(config.Flags(), configFile)
			if err != nil {
				return err
			}
			// client-go logs through klog while it scans.
			logger := app.NewLogger(cfg, env.stderr, env.isTerminal)
			if env.routeLibraryLogs != nil {
				env.routeLibraryLogs(logger)
			}
			return app.PublishScan(cmd.Context(), cfg, logger)
		},
	}, "publish-scan")
	cmd.Flags().StringVar(&configFile, "config", "", "serve's YAML config file, for scan.configMap, catalog.extra and field-rules")
	return cmd
}
