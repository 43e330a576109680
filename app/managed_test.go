package app_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kube-sunset/sunset/app"
	"github.com/kube-sunset/sunset/ingest/eks"
	"github.com/kube-sunset/sunset/ingest/gke"
	"github.com/kube-sunset/sunset/internal/testutil/cloudwatchtest"
	"github.com/kube-sunset/sunset/internal/testutil/kafkatest"
	"github.com/kube-sunset/sunset/internal/testutil/pubsubtest"
)

// managedEvents are n deprecated requests to endpoints.v1 of cluster,
// from three users, a second apart up to now; want gains them by user.
func managedEvents(t *testing.T, cluster string, n int, now time.Time, want map[string]int64) [][]byte {
	t.Helper()
	var out [][]byte
	for i := range n {
		at := now.Add(-time.Duration(n-i) * time.Second)
		user := fmt.Sprintf("%s-user-%d", cluster, i%3)
		want[user]++
		out = append(out, mustJSON(ev(fmt.Sprintf("%s-%d", cluster, i), "user", map[string]any{"username": user},
			"requestReceivedTimestamp", at.Format(time.RFC3339Nano), "stageTimestamp", at.Format(time.RFC3339Nano))))
	}
	return out
}

// Two EKS clusters and a GKE cluster feed one edge Sunset, each under its
// own name, and it forwards what they count to the fleet's topic
// (kafka.forward): a central replica that reads only that topic answers
// for all three, exactly. The edge's lag gauge has a series per source.
func TestManagedSourcesSideBySideFeedAFleet(t *testing.T) {
	moto := cloudwatchtest.Start(t)
	ps := pubsubtest.Start(t)
	for _, kv := range moto.Env() {
		name, value, _ := strings.Cut(kv, "=")
		t.Setenv(name, value)
	}
	t.Setenv("PUBSUB_EMULATOR_HOST", ps.Fake.Addr)
	now := time.Now().UTC()
	want := map[string]map[string]int64{"eks-a": {}, "eks-b": {}, "gke-prod": {}}
	for _, cluster := range []string{"eks-a", "eks-b"} {
		var events []cloudwatchtest.Event
		for _, e := range managedEvents(t, cluster, 30, now, want[cluster]) {
			var at struct{ RequestReceivedTimestamp time.Time }
			require.NoError(t, json.Unmarshal(e, &at))
			events = append(events, cloudwatchtest.Event{Time: at.RequestReceivedTimestamp, Message: string(e)})
		}
		moto.Put(t, eks.DefaultLogGroup(cluster), cloudwatchtest.Stream("aaa"), events)
	}
	var entries [][]byte
	for _, e := range managedEvents(t, "gke-prod", 30, now, want["gke-prod"]) {
		entry, err := pubsubtest.LogEntry(e)
		require.NoError(t, err)
		entries = append(entries, entry)
	}
	ps.Publish(t, entries...)

	brokers := kafkatest.Brokers(t)
	requests := kafkatest.Topic(t, brokers, "sunset.requests", 2)
	edge := testConfig(t)
	fleetConfig(&edge, brokers, requests)
	off := false
	edge.Kafka.Forward, edge.Kafka.Fleet.Count = true, &off
	edge.Ingest.EKS = []eks.Config{{Cluster: "eks-a", PollInterval: time.Second}, {Cluster: "eks-b", PollInterval: time.Second}}
	edge.Ingest.GKE = []gke.Config{{Cluster: "gke-prod", Subscription: ps.Subscription}}
	a := startWith(t, edge, func(o *app.Options) { o.Now = time.Now })
	central := testConfig(t)
	fleetConfig(&central, brokers, requests)
	b := startWith(t, central, func(o *app.Options) { o.Now = time.Now })

	for cluster, users := range want {
		a.eventually(60*time.Second, "the edge counts "+cluster, func() bool {
			return fmt.Sprint(usersOf(t, a, "endpoints.v1", cluster)) == fmt.Sprint(users)
		})
		b.eventually(60*time.Second, "the central replica counts "+cluster, func() bool {
			return fmt.Sprint(usersOf(t, b, "endpoints.v1", cluster)) == fmt.Sprint(users)
		})
	}
	code, body := a.get("/-/ready")
	require.Equal(t, 200, code, string(body))
	for _, c := range []struct{ source, cluster string }{{"eks", "eks-a"}, {"eks", "eks-b"}, {"gke", "gke-prod"}} {
		lag := metricValue(t, a.reg, "sunset_source_lag_seconds", map[string]string{"source": c.source, "cluster": c.cluster})
		// The newest event is a second before the feed's now; the
		// scrape comes later, by as long as the test took to get here.
		require.GreaterOrEqual(t, lag, 1.0, c.cluster)
		// CloudWatch keeps milliseconds.
		require.Less(t, lag, time.Since(now).Seconds()+1.001, c.cluster)
	}
}

// A managed source that cannot read is a warning that says what to do,
// not unreadiness: the webhook's clusters keep their Sunset. Its lag
// counts from the start, so SunsetSourceStalled can fire.
func TestManagedSourceFailureIsAWarning(t *testing.T) {
	moto := cloudwatchtest.Start(t)
	for _, kv := range moto.Env() {
		name, value, _ := strings.Cut(kv, "=")
		t.Setenv(name, value)
	}
	group := eks.DefaultLogGroup("denied")
	moto.CreateGroup(t, group)
	// A role without the log group's read grants: EKS lists the group's
	// streams before it reads any.
	moto.Fail("DescribeLogStreams", -1, cloudwatchtest.AccessDenied("DescribeLogStreams", group))
	cfg := testConfig(t)
	cfg.Ingest.EKS = []eks.Config{{Cluster: "denied", PollInterval: time.Second}}
	s := startWith(t, cfg, func(o *app.Options) { o.Now = time.Now })
	var body string
	s.eventually(30*time.Second, "the warning", func() bool {
		_, b := s.get("/-/ready?verbose")
		body = string(b)
		return strings.Contains(body, "logs:DescribeLogStreams")
	})
	require.Equal(t, "Sunset is ready.\nwarning: eks cluster denied cannot read: DescribeLogStreams on /aws/eks/denied/cluster: access denied; "+
		"grant logs:DescribeLogStreams and logs:FilterLogEvents on arn:aws:logs:us-east-1:123456789012:log-group:/aws/eks/denied/cluster:* to the role Sunset runs as (IRSA or EKS Pod Identity)", strings.TrimSpace(body))
	code, _ := s.post("/audit/webhook/master-0", "application/json", eventList(ev("still-counted")))
	require.Equal(t, 200, code)
	require.Greater(t, metricValue(t, s.reg, "sunset_source_lag_seconds", map[string]string{"source": "eks", "cluster": "denied"}), 0.0,
		"a series from the start, though nothing was read")
}
