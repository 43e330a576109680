package cli

import (
	"cmp"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/kube-sunset/sunset/admission"
	sunsetv1 "github.com/kube-sunset/sunset/api/v1"
	"github.com/kube-sunset/sunset/internal/plural"
)

// webhookRow is one webhook on one resource, as `sunset report webhooks`
// shows it.
type webhookRow struct {
	Webhook  string
	Types    string
	Resource sunsetv1.WebhookResourceCount
}

// webhookRows flattens a list into one row per webhook and resource, over
// the window when the objects have one (else the last 24 hours), slowest
// first: by total webhook latency, then slow requests, then calls.
func webhookRows(list sunsetv1.WebhookCountList) []webhookRow {
	var rows []webhookRow
	for _, it := range list.Items {
		byRes := it.Status.ByResource
		if w := it.Status.Window; w != nil {
			byRes = w.ByResource
		}
		for _, r := range byRes {
			rows = append(rows, webhookRow{Webhook: it.Metadata.Name, Types: strings.Join(it.Spec.Types, ","), Resource: r})
		}
	}
	slices.SortStableFunc(rows, func(a, b webhookRow) int {
		x, y := a.Resource, b.Resource
		return cmp.Or(cmp.Compare(y.WebhookLatencySeconds, x.WebhookLatencySeconds), cmp.Compare(y.SlowRequestCount, x.SlowRequestCount),
			cmp.Compare(y.CallCount, x.CallCount), cmp.Compare(a.Webhook, b.Webhook))
	})
	return rows
}

// writeWebhookTables writes kubectl-style tables: the resources, all
// webhooks together, slowest first (left out for a single webhook's report,
// which has none); then every webhook on every resource; then, when
// kube-apiserver flagged any, the webhook servers whose certificate it
// refuses now or will. Wide adds the cluster and the latency buckets.
func writeWebhookTables(w io.Writer, list sunsetv1.WebhookCountList, wide bool) error {
	tw := tabwriter.NewWriter(w, 0, 8, 3, ' ', 0)
	if len(list.Resources) > 0 {
		writeHeader(tw, wide, "RESOURCE", "CLASS")
		for _, r := range list.Resources {
			writeRow(tw, wide, r, resourceName(r), Dash(strings.Join(r.Classes, ",")))
		}
		fmt.Fprintln(tw)
	}
	writeHeader(tw, wide, "WEBHOOK", "TYPE", "RESOURCE", "CLASS")
	for _, row := range webhookRows(list) {
		r := row.Resource
		writeRow(tw, wide, r, row.Webhook, row.Types, resourceName(r), Dash(strings.Join(r.Classes, ",")))
	}
	if len(list.Certificates) > 0 {
		fmt.Fprintln(tw)
		fmt.Fprintln(tw, "WEBHOOK SERVER\tCLUSTER\tCERTIFICATE\tREFUSED BY DEFAULT IN\tREFUSED IN\tREQUESTS\tRESOURCES")
		for _, c := range list.Certificates {
			names := make([]string, len(c.ByResource))
			for i, r := range c.ByResource {
				names[i] = resourceName(sunsetv1.WebhookResourceCount{Name: r.Name, Subresource: r.Subresource})
			}
			// Hosts, clusters and resources come from audit data.
			fmt.Fprintln(tw, strings.Join(terminalCells([]string{c.Host, c.Cluster, c.Problem, c.RefusedByDefaultInRelease,
				c.RefusedInRelease, fmt.Sprint(c.RequestCount), strings.Join(names, ",")}), "\t"))
		}
	}
	return tw.Flush()
}

// writeCertificateWarnings writes a check's webhook certificate findings in
// the Kubernetes warning format, refused ones marked.
func writeCertificateWarnings(w io.Writer, r sunsetv1.CheckResult) error {
	for _, f := range r.WebhookCertificates {
		refused := ""
		if f.Severity == sunsetv1.SeverityRefused {
			refused = " [refused by " + r.TargetVersion + "]"
		}
		if _, err := fmt.Fprintf(w, "Warning: %s (%d request%s in %s in cluster %s on %s)%s\n", Terminal(f.Warning), f.Requests,
			plural.S(int(f.Requests)), r.Since, Terminal(f.Cluster), Terminal(strings.Join(f.Resources, ", ")), refused); err != nil {
			return err
		}
	}
	return nil
}

func writeHeader(w io.Writer, wide bool, lead ...string) {
	cols := append(lead, "REQUESTS", "CALLS", "MUTATED", "FAILED OPEN", "SLOW", "WEBHOOK LATENCY", "MEAN")
	if wide {
		cols = append(append([]string{"CLUSTER"}, cols...), "<=0.5S", "<=1S", "<=2S", "<=5S", "<=10S", ">10S")
	}
	fmt.Fprintln(w, strings.Join(cols, "\t"))
}

func writeRow(w io.Writer, wide bool, r sunsetv1.WebhookResourceCount, lead ...string) {
	c := r.WebhookCounts
	mean := "-"
	if c.SlowRequestCount > 0 {
		mean = seconds(c.MeanWebhookLatencySeconds)
	}
	cols := append(lead, fmt.Sprint(c.RequestCount), fmt.Sprint(c.CallCount), fmt.Sprint(c.MutationCount), fmt.Sprint(c.FailedOpenCount),
		fmt.Sprint(c.SlowRequestCount), seconds(c.WebhookLatencySeconds), mean)
	if wide {
		b := c.LatencyBuckets
		cols = append(append([]string{r.Cluster}, cols...), fmt.Sprint(b.UpTo500ms), fmt.Sprint(b.UpTo1s), fmt.Sprint(b.UpTo2s),
			fmt.Sprint(b.UpTo5s), fmt.Sprint(b.UpTo10s), fmt.Sprint(b.Over10s))
	}
	// Webhook, resource and cluster names come from audit data.
	fmt.Fprintln(w, strings.Join(terminalCells(cols), "\t"))
}

func resourceName(r sunsetv1.WebhookResourceCount) string {
	if r.Subresource == "" {
		return r.Name
	}
	return r.Name + "/" + r.Subresource
}

// seconds writes a latency as a duration to the millisecond: 14.406s.
func seconds(s float64) string {
	return time.Duration(s * float64(time.Second)).Round(time.Millisecond).String()
}

// WebhooksRequest is `sunset report webhooks [NAME]`: admission webhook
// counts, or one webhook's.
type WebhooksRequest struct {
	Name, Cluster, Class, Output string
	Since                        time.Duration

	query  sunsetv1.WebhookQuery
	format outputFormat
}

// Validate checks the flags and prepares the query.
func (w *WebhooksRequest) Validate() error {
	format, err := parseFormat(w.Output)
	errs := []error{err, validateSince(w.Since)}
	w.format, w.query = format, sunsetv1.WebhookQuery{Cluster: w.Cluster, Since: w.Since}
	if w.Class != "" {
		if w.query.Class, err = admission.ParseClass(w.Class); err != nil {
			errs = append(errs, fmt.Errorf("--%w", err))
		}
	}
	return errors.Join(errs...)
}

// Run reads the webhook counts and prints them.
func (w *WebhooksRequest) Run(r Reader, out Output) error {
	objects := w.format == formatJSON || w.format == formatYAML
	var list sunsetv1.WebhookCountList
	if w.Name != "" {
		obj, err := r.Webhook(w.Name, w.query)
		if errors.Is(err, sunsetv1.ErrNotFound) {
			return fmt.Errorf("no audit annotation named webhook %s in the last %s (names are configuration.webhook; `sunset report webhooks` lists them)", w.Name, FormatDuration(w.Since))
		}
		if err != nil {
			return err
		}
		if objects {
			return encodeObject(out.Out, obj, w.format)
		}
		list = sunsetv1.WebhookCountList{Items: []sunsetv1.WebhookCount{obj}, Resources: []sunsetv1.WebhookResourceCount{}}
	} else {
		var err error
		if list, err = r.Webhooks(w.query); err != nil {
			return err
		}
	}
	if objects {
		return encodeObject(out.Out, list, w.format)
	}
	if len(list.Items) == 0 && len(list.Resources) == 0 {
		fmt.Fprintln(out.Err, w.noAnnotations(r))
		return nil
	}
	return writeWebhookTables(out.Out, list, w.format == formatWide)
}

// noAnnotations says the window holds no webhook annotations, and, when
// --class or --cluster emptied it, which of them and what is there
// without it.
//
//	No admission webhook annotations on critical resources in the last 24h (3 webhooks were seen; without --class critical, `sunset report webhooks` shows them).
func (w *WebhooksRequest) noAnnotations(r Reader) string {
	on := ""
	if w.Class != "" {
		on = " on " + w.Class + " resources"
	}
	if w.Cluster != "" {
		on += fmt.Sprintf(" in cluster %q", w.Cluster)
	}
	msg := fmt.Sprintf("No admission webhook annotations%s in the last %s", on, FormatDuration(w.Since))
	if on == "" {
		return msg + "."
	}
	all, err := r.Webhooks(sunsetv1.WebhookQuery{Since: w.Since})
	if err != nil || len(all.Items) == 0 {
		return msg + "."
	}
	var set []string
	if w.Class != "" {
		set = append(set, "--class "+w.Class)
	}
	if w.Cluster != "" {
		set = append(set, "--cluster "+w.Cluster)
	}
	n := len(all.Items)
	were, them := "were", "them"
	if n == 1 {
		were, them = "was", "it"
	}
	return fmt.Sprintf("%s (%d webhook%s %s seen; without %s, `sunset report webhooks` shows %s).", msg, n, plural.S(n), were, strings.Join(set, " and "), them)
}
