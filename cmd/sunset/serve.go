package main

import (
	"errors"
	"os"

	"github.com/mattn/go-isatty"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/spf13/cobra"

	"github.com/kube-sunset/sunset/app"
)

func newServeCommand() *cobra.Command {
	var configFile string
	keys := app.Flags()
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Receive audit events and serve counts (the daemon)",
		Long: `Serve receives kube-apiserver audit webhook batches on /audit/webhook,
keeps exact hourly counts of deprecated-API requests in a badger directory,
and serves them on /apis/sunset.dev/v1/apirequestcounts and /metrics.

With no configuration it keeps data in ./sunset-data and listens on
127.0.0.1:8080, where anyone on this machine may read. On any other address
readers must authenticate (see --authentication-kubeconfig, --token-auth-file,
--client-ca-file) unless --allow-unauthenticated is set, and the webhook needs
credentials (--webhook-token-auth-file, --webhook-token-file,
--tls-client-ca-file) unless --webhook-allow-unauthenticated is set.
Every flag can also be set in the --config file (same key) or as an
environment variable (SUNSET_ + key in upper case, dashes as underscores).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := app.LoadConfig(keys, configFile)
			// Every problem at once, serving's own included.
			if err := errors.Join(err, cfg.ValidateListen()); err != nil {
				return err
			}
			logger := app.NewLogger(cfg, os.Stderr, isatty.IsTerminal(os.Stderr.Fd()))
			reg := prometheus.NewRegistry()
			reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
			a, err := app.New(cfg, app.Options{Logger: logger, Registry: reg, Build: buildInfo()})
			if err != nil {
				return err
			}
			return a.Run(cmd.Context())
		},
	}
	cmd.Flags().AddFlagSet(keys)
	// --config is not itself a config key, so it is added after the set
	// that viper binds.
	cmd.Flags().StringVar(&configFile, "config", "", "YAML config file with the same keys as the flags")
	return cmd
}
