package cli

import (
	"cmp"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	sunsetv1 "github.com/kube-sunset/sunset/api/v1"
	"github.com/kube-sunset/sunset/internal/plural"
)

// WebhookRow is one webhook on one resource, as `sunset report webhooks`
// shows it.
type WebhookRow struct {
	Webhook  string
	Types    string
	Resource sunsetv1.WebhookResourceCount
}

// WebhookRows flattens a list into one row per webhook and resource, over
// the window when the objects have one (else the last 24 hours), slowest
// first: by total webhook latency, then slow requests, then calls.
func WebhookRows(list sunsetv1.WebhookCountList) []WebhookRow {
	var rows []WebhookRow
	for _, it := range list.Items {
		byRes := it.Status.ByResource
		if w := it.Status.Window; w != nil {
			byRes = w.ByResource
		}
		for _, r := range byRes {
			rows = append(rows, WebhookRow{Webhook: it.Metadata.Name, Types: strings.Join(it.Spec.Types, ","), Resource: r})
		}
	}
	slices.SortStableFunc(rows, func(a, b WebhookRow) int {
		x, y := a.Resource, b.Resource
		return cmp.Or(cmp.Compare(y.WebhookLatencySeconds, x.WebhookLatencySeconds), cmp.Compare(y.SlowRequestCount, x.SlowRequestCount),
			cmp.Compare(y.CallCount, x.CallCount), cmp.Compare(a.Webhook, b.Webhook))
	})
	return rows
}

// WriteWebhookTables writes kubectl-style tables: the resources, all
// webhooks together, slowest first (left out for a single webhook's report,
// which has none); then every webhook on every resource; then, when
// kube-apiserver flagged any, the webhook servers whose certificate it
// refuses now or will. Wide adds the cluster and the latency buckets.
func WriteWebhookTables(w io.Writer, list sunsetv1.WebhookCountList, wide bool) error {
	tw := tabwriter.NewWriter(w, 0, 8, 3, ' ', 0)
	if len(list.Resources) > 0 {
		writeHeader(tw, wide, "RESOURCE", "CLASS")
		for _, r := range list.Resources {
			writeRow(tw, wide, r, resourceName(r), Dash(strings.Join(r.Classes, ",")))
		}
		fmt.Fprintln(tw)
	}
	writeHeader(tw, wide, "WEBHOOK", "TYPE", "RESOURCE", "CLASS")
	for _, row := range WebhookRows(list) {
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
