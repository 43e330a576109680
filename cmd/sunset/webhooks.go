package main

import (
	"errors"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/kube-sunset/sunset/admission"
	"github.com/kube-sunset/sunset/api"
	"github.com/kube-sunset/sunset/report"
	"github.com/kube-sunset/sunset/source"
)

func newReportWebhooksCommand(env cli) *cobra.Command {
	var (
		src            source.Flags
		cluster, class string
		output         string
		since          time.Duration
	)
	cmd := &cobra.Command{
		Use:   "webhooks [CONFIGURATION.WEBHOOK]",
		Short: "Show which admission webhooks slow down, fail open on or touch which resources",
		Long: `Report webhooks reads the admission webhook counts Sunset keeps from the
audit annotations: first every resource, all webhooks together, slowest
first (total webhook latency); then every webhook on every resource with its
calls, mutations, failed-open calls and the requests it slowed, over the
window (--since, default 24h). Given a webhook's name
(configuration.webhook), only its rows.

Webhook latency is only annotated on requests slower than 500 ms, and a
validating webhook leaves a trace only when it fails open.`,
		Example: `  sunset report webhooks
  sunset report webhooks --class critical -o wide
  sunset report webhooks istio-sidecar-injector.sidecar-injector.istio.io --since 168h
  sunset report webhooks --data-dir /var/lib/sunset -o json`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			format, err := report.ParseFormat(output)
			var errs []error
			if err != nil {
				errs = append(errs, err)
			}
			if since < time.Hour {
				errs = append(errs, fmt.Errorf("--since %s is shorter than 1h; counts are hourly", since))
			}
			q := api.WebhookQuery{Cluster: cluster, Since: since}
			if class != "" {
				if q.Class, err = admission.ParseClass(class); err != nil {
					errs = append(errs, fmt.Errorf("--%w", err))
				}
			}
			if err := errors.Join(errs...); err != nil {
				return err
			}
			s, closeSource, err := src.Open(env.now)
			if err != nil {
				return err
			}
			defer closeSource()
			ws, ok := s.(source.WebhookSource)
			if !ok {
				return errors.New("this source cannot read webhook counts")
			}
			out := cmd.OutOrStdout()
			var list api.WebhookCountList
			if len(args) == 1 {
				obj, err := ws.Webhook(args[0], q)
				if err != nil {
					if errors.Is(err, api.ErrNotFound) {
						return fmt.Errorf("no audit annotation named webhook %s in the last %s (names are configuration.webhook; `sunset report webhooks` lists them)", args[0], report.FormatDuration(since))
					}
					return err
				}
				if format == report.FormatJSON || format == report.FormatYAML {
					return report.WriteObject(out, obj, format)
				}
				list = api.WebhookCountList{Items: []api.WebhookCount{obj}, Resources: []api.WebhookResourceCount{}}
			} else if list, err = ws.Webhooks(q); err != nil {
				return err
			}
			if format == report.FormatJSON || format == report.FormatYAML {
				return report.WriteObject(out, list, format)
			}
			if len(list.Items) == 0 && len(list.Resources) == 0 {
				fmt.Fprintf(cmd.ErrOrStderr(), "No admission webhook annotations in the last %s.\n", report.FormatDuration(since))
				return nil
			}
			return report.WriteWebhookTables(out, list, format == report.FormatWide)
		},
	}
	src.AddFlags(cmd.Flags())
	cmd.Flags().StringVar(&cluster, "cluster", "", "only this cluster")
	cmd.Flags().DurationVar(&since, "since", 24*time.Hour, "how far back to look, in whole hours (up to the retention)")
	cmd.Flags().StringVar(&class, "class", "", "only resources of this class: critical, security or virtual")
	cmd.Flags().StringVarP(&output, "output", "o", "table", "table, wide, json or yaml")
	return cmd
}
