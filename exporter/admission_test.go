package exporter

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"github.com/kube-sunset/sunset/countkey"
)

const callsHeader = `
# HELP sunset_admission_webhook_calls Admission webhook calls in the sliding window (metrics.window), from the audit annotations, by resource, webhook and result (mutated, unchanged, failed_open). Validating webhooks leave an annotation only when they fail open. Falls to 0 when calls stop; the series disappears after metrics.grace.
# TYPE sunset_admission_webhook_calls gauge
`

// Calls split by result, summed over hours, fall to 0 when they leave the
// window and disappear after the grace period; totals rows are not calls.
func TestAdmissionGaugesFallToZeroThenDisappear(t *testing.T) {
	now := hour.Add(10 * time.Minute)
	st := openStore(t, &now)
	pods := countkey.AdmissionKey{Cluster: "prod", Version: "v1", Resource: "pods"}
	istio := pods
	istio.Type, istio.Configuration, istio.Webhook = "mutating", "istio", "sidecar-injector.istio.io"
	var reqs []countkey.Request
	for i, h := range []time.Time{hour.Add(-time.Hour), hour} {
		total, call := pods, istio
		total.Hour, call.Hour = h, h
		reqs = append(reqs, countkey.Request{ID: string(rune('a' + i)), Key: countkey.CountKey{Cluster: "prod", Cell: countkey.Cell{Hour: h}}, Admission: []countkey.AdmissionRow{
			{Key: total, Counts: countkey.AdmissionCounts{Requests: 1, Calls: 3, Mutations: 1, FailedOpen: 1}},
			{Key: call, Counts: countkey.AdmissionCounts{Requests: 1, Calls: 3, Mutations: 1, FailedOpen: 1}},
		}})
	}
	_, err := st.Commit(reqs)
	require.NoError(t, err)
	c := NewAdmission(AdmissionOptions{Querier: st, Now: func() time.Time { return now }})
	series := func(mutated, unchanged, failedOpen int) string {
		return callsHeader + strings.NewReplacer("M", strconv.Itoa(mutated), "U", strconv.Itoa(unchanged), "F", strconv.Itoa(failedOpen)).Replace(`
sunset_admission_webhook_calls{class="critical",cluster="prod",configuration="istio",group="",resource="pods",result="failed_open",subresource="",type="mutating",version="v1",webhook="sidecar-injector.istio.io"} F
sunset_admission_webhook_calls{class="critical",cluster="prod",configuration="istio",group="",resource="pods",result="mutated",subresource="",type="mutating",version="v1",webhook="sidecar-injector.istio.io"} M
sunset_admission_webhook_calls{class="critical",cluster="prod",configuration="istio",group="",resource="pods",result="unchanged",subresource="",type="mutating",version="v1",webhook="sidecar-injector.istio.io"} U
`)
	}
	require.NoError(t, testutil.CollectAndCompare(c, strings.NewReader(series(2, 2, 2))))

	now = hour.Add(23*time.Hour + 10*time.Minute) // 18:00 has left the 24h window
	require.NoError(t, testutil.CollectAndCompare(c, strings.NewReader(series(1, 1, 1))))
	now = hour.Add(24*time.Hour + 10*time.Minute) // both have: 0 for the grace hour
	require.NoError(t, testutil.CollectAndCompare(c, strings.NewReader(series(0, 0, 0))))
	now = hour.Add(25*time.Hour + 10*time.Minute)
	require.Zero(t, testutil.CollectAndCount(c))
}
