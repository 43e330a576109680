package api

import (
	"encoding/json"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	sunsetv1 "github.com/kube-sunset/sunset/api/v1"
)

// nameColumn is every Table's first column, as kube-apiserver's.
var nameColumn = metav1.TableColumnDefinition{Name: "Name", Type: "string", Format: "name", Description: metav1.ObjectMeta{}.SwaggerDoc()["name"]}

// webhookColumns are those of `sunset report webhooks`' WEBHOOK table,
// over the window asked for (?since=), else the last 24 hours.
var webhookColumns = []metav1.TableColumnDefinition{
	nameColumn,
	{Name: "Type", Type: "string", Description: "The webhook's types: mutating, validating, or both."},
	{Name: "Requests", Type: "integer", Description: "Requests the webhook was called on."},
	{Name: "Calls", Type: "integer", Description: "Calls, a reinvoked mutating webhook's twice; for a validating webhook only those that failed open."},
	{Name: "Mutated", Type: "integer", Description: "Calls that changed the object."},
	{Name: "FailedOpen", Type: "integer", Description: "Calls that failed and were ignored (failurePolicy: Ignore)."},
	{Name: "Slow", Type: "integer", Description: "Requests whose webhooks took over 500 ms, which kube-apiserver annotates with their latency."},
	{Name: "WebhookLatency", Type: "string", Priority: 1, Description: "The webhook latency of the slow requests, summed."},
	{Name: "Mean", Type: "string", Priority: 1, Description: "The webhook latency per slow request."},
}

// webhookTable is the Table of webhook counts.
func webhookTable(items []sunsetv1.WebhookCount) func(include string) (*metav1.Table, error) {
	return func(include string) (*metav1.Table, error) {
		t := newTableOf(webhookColumns)
		for _, it := range items {
			c := it.Status.WebhookCounts
			if it.Status.Window != nil {
				c = it.Status.Window.WebhookCounts
			}
			row, err := objectRow([]any{it.Metadata.Name, strings.Join(it.Spec.Types, ","), c.RequestCount, c.CallCount, c.MutationCount,
				c.FailedOpenCount, c.SlowRequestCount, seconds(c.WebhookLatencySeconds), seconds(c.MeanWebhookLatencySeconds)},
				it.Metadata, it, include)
			if err != nil {
				return nil, err
			}
			t.Rows = append(t.Rows, row)
		}
		return t, nil
	}
}

// seconds writes a latency as `sunset report webhooks` does: a duration
// to the millisecond, empty when there is none.
func seconds(s float64) string {
	if s == 0 {
		return ""
	}
	return time.Duration(s * float64(time.Second)).Round(time.Millisecond).String()
}

// checkColumns sum up an upgrade check as `sunset check` ends: the
// verdict, and what it found.
var checkColumns = []metav1.TableColumnDefinition{
	nameColumn,
	{Name: "Safe", Type: "boolean", Description: "Whether the check passes: its exit code is 0."},
	{Name: "Removed", Type: "integer", Description: "APIs removed in or before the release that were requested in the window, and flagged webhook server certificates it refuses."},
	{Name: "Deprecated", Type: "integer", Description: "APIs requested in the window that are deprecated and still served in the release, and flagged webhook server certificates it still accepts."},
	{Name: "Since", Type: "string", Description: "The window checked."},
	{Name: "ExitCode", Type: "integer", Priority: 1, Description: "The exit code of sunset check for the same release."},
	{Name: "Message", Type: "string", Priority: 1, Description: "The verdict in one sentence."},
}

// checkTable is the Table of upgrade checks.
func checkTable(items []sunsetv1.UpgradeCheck) func(include string) (*metav1.Table, error) {
	return func(include string) (*metav1.Table, error) {
		t := newTableOf(checkColumns)
		for _, it := range items {
			st := it.Status
			var removed, deprecated int64
			for _, f := range st.Findings {
				switch f.Severity {
				case sunsetv1.SeverityRemoved:
					removed++
				case sunsetv1.SeverityDeprecated:
					deprecated++
				}
			}
			for _, c := range st.WebhookCertificates {
				switch c.Severity {
				case sunsetv1.SeverityRefused:
					removed++
				case sunsetv1.SeverityDeprecated:
					deprecated++
				}
			}
			row, err := objectRow([]any{it.Metadata.Name, st.ExitCode == sunsetv1.ExitCodeSafe, removed, deprecated, st.Since,
				int(st.ExitCode), st.Message}, it.Metadata, it, include)
			if err != nil {
				return nil, err
			}
			t.Rows = append(t.Rows, row)
		}
		return t, nil
	}
}

// newTableOf starts a Table with the given columns.
func newTableOf(columns []metav1.TableColumnDefinition) *metav1.Table {
	return &metav1.Table{
		TypeMeta:          metav1.TypeMeta{APIVersion: metav1.SchemeGroupVersion.String(), Kind: "Table"},
		ColumnDefinitions: columns,
		Rows:              []metav1.TableRow{},
	}
}

// objectRow is a row of cells, holding of its object what include asks:
// nothing (None), the object whole (Object), else its metadata.
func objectRow(cells []any, meta metav1.ObjectMeta, full any, include string) (metav1.TableRow, error) {
	row := metav1.TableRow{Cells: cells}
	var obj any
	switch include {
	case "None":
		return row, nil
	case "Object":
		obj = full
	default:
		obj = metav1.PartialObjectMetadata{TypeMeta: metav1.TypeMeta{APIVersion: metav1.SchemeGroupVersion.String(), Kind: "PartialObjectMetadata"}, ObjectMeta: meta}
	}
	raw, err := json.Marshal(obj)
	if err != nil {
		return row, err
	}
	row.Object = runtime.RawExtension{Raw: raw}
	return row, nil
}
