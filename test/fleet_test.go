package test

import (
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	kafkago "github.com/segmentio/kafka-go"
	"github.com/stretchr/testify/require"

	"github.com/kube-sunset/sunset/internal/testutil/kafkatest"
	"github.com/kube-sunset/sunset/internal/testutil/testserver"
)

// Three replicas (separate processes) filter 50,000 raw messages from 5
// clusters in one consumer group and each counts the whole fleet's topic.
// Random replicas are killed with SIGKILL and restarted, a fourth replica
// joins and leaves mid-stream, and a webhook-fed Sunset of a sixth cluster
// forwards into the same topic. At the end every replica's JSON API holds
// exactly the counts worked out from the input.
func TestFleetExactAcrossKillsAndRebalances(t *testing.T) {
	if testing.Short() {
		t.Skip("starts five Sunset processes and streams 50,000 messages")
	}
	brokers := kafkatest.Brokers(t)
	const rawPartitions = 6
	raw := kafkatest.Topic(t, brokers, "fleet-raw", rawPartitions)
	requests := kafkatest.Topic(t, brokers, "sunset.requests", 4)
	group := "fleet-" + raw
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	now := time.Now().UTC()
	in := genFleetInput(50000, seed, now)

	dir := t.TempDir()
	replicaCfg := filepath.Join(dir, "replica.yaml")
	require.NoError(t, os.WriteFile(replicaCfg, []byte(fmt.Sprintf(`kafka:
  brokers: [%s]
  topics: [%s]
  groupID: %s
  sessionTimeout: 2s
  rebalanceTimeout: 8s
  batchWait: 10ms
  nodeField: hostname
  clusterField: cluster
  fleet:
    topic: %s
`, strings.Join(brokers, ", "), raw, group, requests)), 0o600))
	edgeCfg := filepath.Join(dir, "edge.yaml")
	require.NoError(t, os.WriteFile(edgeCfg, []byte(fmt.Sprintf(`default-cluster: edge
kafka:
  brokers: [%s]
  forward: true
  fleet:
    topic: %s
    count: false
`, strings.Join(brokers, ", "), requests)), 0o600))

	type replica struct {
		p    *process
		data string
	}
	// Debug level: the waits below wake on each committed batch's line.
	replicaArgs := []string{"--config", replicaCfg, "--log-level", "debug"}
	replicas := make([]*replica, 3)
	for i := range replicas {
		replicas[i] = &replica{data: t.TempDir()}
		replicas[i].p = startBinary(t, replicas[i].data, replicaArgs...)
	}
	edge := startBinary(t, t.TempDir(), "--config", edgeCfg)
	ready := func(p *process) {
		t.Helper()
		require.NoError(t, p.await(60*time.Second, testserver.RecheckGap, func() bool {
			resp, err := http.Get(p.url + "/-/ready")
			if err != nil {
				return false
			}
			resp.Body.Close()
			return resp.StatusCode == 200
		}), "turning ready")
	}
	for _, r := range replicas {
		ready(r.p)
	}

	streamStart := time.Now()
	rng := rand.New(rand.NewPCG(seed, 7))
	kills := 0
	var extra *process
	edgeBatch := 0
	const chunks = 10
	for c := range chunks {
		kafkatest.Produce(t, brokers, raw, kafkago.Lz4, in.msgs[c*len(in.msgs)/chunks:(c+1)*len(in.msgs)/chunks]...)
		switch c {
		case 2:
			extra = startBinary(t, t.TempDir(), replicaArgs...)
		case 3, 7:
			// The edge cluster's apiserver sends two webhook batches.
			for range 2 {
				var items []string
				for range 50 {
					id := fmt.Sprintf("edge-%d", edgeBatch)
					edgeBatch++
					user := fmt.Sprintf("edge-user-%d", edgeBatch%4)
					items = append(items, string(fleetEvent(id, "", "", "ResponseComplete", "list", user, refEndpoints, 200, annDeprecated, "", now)))
					in.want.add("edge", "endpoints.v1", user)
				}
				resp, err := http.Post(edge.url+"/audit/webhook/edge-master-0", "application/json",
					strings.NewReader(`{"kind":"EventList","apiVersion":"audit.k8s.io/v1","items":[`+strings.Join(items, ",")+`]}`))
				require.NoError(t, err)
				resp.Body.Close()
				require.Equal(t, 200, resp.StatusCode)
			}
		case 6:
			// The added replica is scaled away again.
			require.NoError(t, extra.cmd.Process.Signal(syscall.SIGTERM))
			require.NoError(t, <-extra.exited, "stderr:\n%s", extra.stderr)
		}
		if c%2 == 1 || c == chunks-1 {
			r := replicas[rng.IntN(len(replicas))]
			// Killed only once it has joined the group: the test broker
			// keeps a member killed inside its first JoinGroup for good
			// (CONTRIBUTING.md); Kafka expires it.
			r.p.waitCount(t, "joined consumer group", 1, 60*time.Second)
			require.NoError(t, r.p.cmd.Process.Signal(syscall.SIGKILL))
			<-r.p.exited
			kills++
			r.p = startBinary(t, r.data, replicaArgs...)
		}
		t.Logf("chunk %d: %s into the stream", c, time.Since(streamStart).Round(time.Millisecond))
	}
	require.GreaterOrEqual(t, kills, 5)
	t.Logf("streamed with kills in %s", time.Since(streamStart).Round(time.Millisecond))

	clusters := []string{"cluster-0", "cluster-1", "cluster-2", "cluster-3", "cluster-4", "edge"}
	var total int64
	for _, n := range in.want {
		total += n
	}
	began := time.Now()
	t.Logf("%d raw messages (%d copies of counting events), %d kills, %d requests expected in %d cells",
		len(in.msgs), in.copies, kills, total, len(in.want))
	match := func(r *replica) {
		t.Helper()
		var got fleetCounts
		err := r.p.await(90*time.Second, testserver.RecheckGap, func() bool {
			var err error
			got, err = fleetAnswer(r.p.url, clusters)
			return err == nil && len(in.want.diff(got)) == 0
		})
		if err != nil {
			// Tell a filter that lost records from a counter that did not
			// read them.
			inTopic := topicCounts(t, brokers, requests)
			t.Logf("the fleet's topic holds %d cells that differ from the input: %v", len(in.want.diff(inTopic)), in.want.diff(inTopic))
			for _, other := range replicas {
				g, _ := fleetAnswer(other.p.url, clusters)
				t.Logf("replica %s differs in %d cells; its warnings:\n%s", other.data, len(in.want.diff(g)), warnings(other.p.stderr.String()))
			}
		}
		require.Empty(t, in.want.diff(got), "replica %s: %v", r.data, err)
	}
	for _, r := range replicas {
		match(r)
	}
	t.Logf("every replica exact %s after the stream", time.Since(began).Round(time.Millisecond))

	// Once the group has committed every raw message nothing more is
	// produced. A replica restarted then is ready only when it has counted
	// the fleet's topic to its end: the answers must still be exact, no
	// late copy counted twice.
	kafkatest.WaitGroupCommitted(t, brokers, group, raw, rawPartitions, 60*time.Second)
	t.Logf("the group committed everything %s after the stream", time.Since(began).Round(time.Millisecond))
	for _, r := range replicas {
		require.NoError(t, r.p.cmd.Process.Signal(syscall.SIGTERM))
		require.NoError(t, <-r.p.exited, "stderr:\n%s", r.p.stderr)
		r.p = startBinary(t, r.data, replicaArgs...)
	}
	for _, r := range replicas {
		ready(r.p)
		caught, err := metricSeries(r.p.url, "sunset_fleet_caught_up")
		require.NoError(t, err)
		require.Equal(t, 1.0, caught)
		got, err := fleetAnswer(r.p.url, clusters)
		require.NoError(t, err)
		require.Empty(t, in.want.diff(got), "replica %s after the stream", r.data)
	}
	t.Logf("restarted replicas exact %s after the stream", time.Since(began).Round(time.Millisecond))

	// The deprecated-API gauges are the same on every replica, and add up
	// to the API requests of the input.
	var apiRequests float64
	for k, n := range in.want {
		if !strings.Contains(k, " field:") {
			apiRequests += float64(n)
		}
	}
	var gauges []string
	for _, r := range replicas {
		series, sum, err := gaugeSeries(r.p.url, "sunset_deprecated_requests{")
		require.NoError(t, err)
		require.Equal(t, apiRequests, sum, "replica %s", r.data)
		gauges = append(gauges, series)
	}
	require.Equal(t, gauges[0], gauges[1])
	require.Equal(t, gauges[0], gauges[2])

	outbox, err := metricSeries(edge.url, "sunset_fleet_outbox_batches")
	require.NoError(t, err)
	require.Equal(t, 0.0, outbox, "the edge forwarded everything")
}
