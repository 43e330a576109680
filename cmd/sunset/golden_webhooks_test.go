package main

import (
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kube-sunset/sunset/internal/testutil/auditcount"
)

// webhookCount is fixtureCount with webhookFixture's crafted admission
// events.
func webhookCount(t *testing.T) *auditcount.Counter {
	t.Helper()
	c := fixtureCount(t)
	c.AddFile(t, "prod", "master-0", "../../admission/testdata/crafted-events.jsonl")
	return c
}

// securityResources are README's default security class.
var securityResources = []string{"secrets", "serviceaccounts", "mutatingwebhookconfigurations", "validatingwebhookconfigurations", "tokenreviews", "certificatesigningrequests"}

// webhookTables checks `sunset report webhooks`: a table of resources (if
// resources) and one of webhooks on resources, each row with its counts,
// and every resource and webhook that keep accepts listed.
func webhookTables(t *testing.T, c *auditcount.Counter, out string, resources bool, keep func(auditcount.WebhookRequest) bool) {
	t.Helper()
	tables := strings.Split(strings.TrimRight(out, "\n"), "\n\n")
	type key = webhookKey
	want := map[key]auditcount.WebhookCounts{}
	for _, w := range c.Webhooks {
		if !keep(w) || (w.Webhook == "" && !resources) {
			continue
		}
		sum := want[key{w.Resource, w.Webhook}]
		sum.Add(w.WebhookCounts)
		want[key{w.Resource, w.Webhook}] = sum
	}
	got := map[key]auditcount.WebhookCounts{}
	for _, tb := range tables {
		for _, row := range table(t, tb, nil) {
			latency, err := time.ParseDuration(row["WEBHOOK LATENCY"])
			require.NoError(t, err)
			got[key{row["RESOURCE"], row["WEBHOOK"]}] = auditcount.WebhookCounts{Requests: number(t, row["REQUESTS"]), Calls: number(t, row["CALLS"]),
				Mutations: number(t, row["MUTATED"]), FailedOpen: number(t, row["FAILED OPEN"]), Slow: number(t, row["SLOW"]), Latency: latency}
		}
	}
	require.Equal(t, slices.SortedFunc(maps.Keys(want), cmpKey), slices.SortedFunc(maps.Keys(got), cmpKey))
	for k, w := range want {
		g := got[k]
		// Printed to the millisecond.
		require.InDelta(t, w.Latency.Seconds(), g.Latency.Seconds(), 0.001, "%v", k)
		g.Latency = w.Latency
		require.Equal(t, w, g, "%v", k)
	}
}

// webhookKey is a row of `sunset report webhooks`: a resource's (webhook
// empty) or a webhook's on a resource.
type webhookKey struct{ resource, webhook string }

func cmpKey(a, b webhookKey) int {
	return strings.Compare(a.resource+"\x00"+a.webhook, b.resource+"\x00"+b.webhook)
}
