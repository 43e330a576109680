package main

import (
	"errors"

	"github.com/spf13/cobra"

	"github.com/kube-sunset/sunset/app"
	"github.com/kube-sunset/sunset/config"
)

func newServeCommand(env console, build app.BuildInfo) *cobra.Command {
	var configFile string
	keys := config.Flags()
	cmd := withHelp(&cobra.Command{
		Use:   "serve",
		Short: "Receive audit events and serve counts (the daemon)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := config.Load(keys, configFile)
			// Every problem at once, serving's own included.
			if err := errors.Join(err, cfg.ValidateListen()); err != nil {
				return err
			}
			logger := app.NewLogger(cfg, env.stderr, env.isTerminal)
			if env.routeLibraryLogs != nil {
				env.routeLibraryLogs(logger)
			}
			return app.Serve(cmd.Context(), cfg, logger, build)
		},
	}, "serve")
	cmd.Flags().AddFlagSet(keys)
	// --config is not itself a config key, so it is added after the set
	// that viper binds.
	cmd.Flags().StringVar(&configFile, "config", "", "YAML config file with the same keys as the flags")
	return cmd
}
