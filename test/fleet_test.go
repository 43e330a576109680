package test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	kafkago "github.com/segmentio/kafka-go"
	"github.com/stretchr/testify/require"

	"github.com/kube-sunset/sunset/internal/testutil/kafkatest"
	"github.com/kube-sunset/sunset/internal/testutil/testserver"
)

// fleetCounts is what a fleet answers: requests by cluster, API (or
// field:<rule>) and username.
type fleetCounts map[string]int64

func (c fleetCounts) add(cluster, api, user string) { c[cluster+" "+api+" "+user]++ }

// diff lists the cells where got differs from c, or is empty.
func (c fleetCounts) diff(got fleetCounts) []string {
	var out []string
	for k, n := range c {
		if got[k] != n {
			out = append(out, fmt.Sprintf("%s: want %d, got %d", k, n, got[k]))
		}
	}
	for k, n := range got {
		if _, ok := c[k]; !ok {
			out = append(out, fmt.Sprintf("%s: want 0, got %d", k, n))
		}
	}
	slices.Sort(out)
	return out
}

// fleetInput is a generated stream of raw audit messages from several
// clusters, with the counts it must produce, worked out from the generated
// events themselves, not by Sunset's code.
type fleetInput struct {
	msgs []kafkago.Message
	want fleetCounts
	// copies is how many counting events were sent a second time.
	copies int
}

// fleetEvent is one audit event with the shipper's cluster and hostname
// fields beside its own (fluent-bit or Vector with a record modifier). ref
// is the objectRef JSON, ann the annotations JSON, body the requestObject
// JSON or "" for Metadata level. A template rather than json.Marshal: the
// race detector makes 50,000 marshals of maps slow.
func fleetEvent(id, cluster, node, stage, verb, user, ref string, code int, ann, body string, at time.Time) []byte {
	level, object := "Metadata", ""
	if body != "" {
		level, object = "Request", `,"requestObject":`+body
	}
	ts := at.Format(time.RFC3339Nano)
	return fmt.Appendf(nil, `{"kind":"Event","apiVersion":"audit.k8s.io/v1","level":%q,"auditID":%q,"stage":%q,"verb":%q,`+
		`"user":{"username":%q,"groups":["system:authenticated"]},"userAgent":%q,"sourceIPs":["10.1.2.3"],"objectRef":%s,`+
		`"responseStatus":{"code":%d},"requestReceivedTimestamp":%q,"stageTimestamp":%q,"annotations":{%s},"cluster":%q,"hostname":%q%s}`,
		level, id, stage, verb, user, "client-"+user+"/1.0 (linux/amd64)", ref, code, ts, ts, ann, cluster, node, object)
}

// Object references and annotations of the generated events.
const (
	refEndpoints   = `{"resource":"endpoints","apiVersion":"v1"}`
	refFlowSchemas = `{"resource":"flowschemas","apiGroup":"flowcontrol.apiserver.k8s.io","apiVersion":"v1beta3"}`
	refIngresses   = `{"resource":"ingresses","apiGroup":"extensions","apiVersion":"v1beta1"}`
	refNodeStatus  = `{"resource":"nodes","subresource":"status","apiVersion":"v1"}`
	refPods        = `{"resource":"pods","apiVersion":"v1"}`
	annDeprecated  = `"k8s.io/deprecated":"true"`
	annAllowed     = `"authorization.k8s.io/decision":"allow"`
)

// genFleetInput makes n raw messages from 5 clusters of 3 apiservers each.
// About 6 % of the events count: deprecated Endpoints reads, a deprecated
// FlowSchema version with its removed release, 404s to the removed
// extensions/v1beta1 Ingress (the catalog's), and kubelets setting the
// deprecated kubeProxyVersion field. The rest are other APIs or earlier
// stages. About 1 in 8 counting events is sent again later, under another
// key, so that its copy lands on another partition.
func genFleetInput(n int, seed uint64, at time.Time) fleetInput {
	rng := rand.New(rand.NewPCG(seed, seed^0x5eed))
	in := fleetInput{want: fleetCounts{}}
	var later []kafkago.Message
	for i := range n {
		cluster := fmt.Sprintf("cluster-%d", rng.IntN(5))
		node := fmt.Sprintf("%s-master-%d", cluster, rng.IntN(3))
		id := fmt.Sprintf("%s-%08d", cluster, i)
		user := fmt.Sprintf("user-%d", rng.IntN(12))
		verb := []string{"get", "list", "watch"}[rng.IntN(3)]
		var value []byte
		counts := true
		switch k := rng.IntN(1000); {
		case k < 35:
			value = fleetEvent(id, cluster, node, "ResponseComplete", verb, user, refEndpoints, 200, annDeprecated, "", at)
			in.want.add(cluster, "endpoints.v1", user)
		case k < 45:
			value = fleetEvent(id, cluster, node, "ResponseComplete", verb, user, refFlowSchemas, 200,
				annDeprecated+`,"k8s.io/removed-release":"1.32"`, "", at)
			in.want.add(cluster, "flowschemas.v1beta3.flowcontrol.apiserver.k8s.io", user)
		case k < 52:
			value = fleetEvent(id, cluster, node, "ResponseComplete", "get", user, refIngresses, 404, "", "", at)
			in.want.add(cluster, "ingresses.v1beta1.extensions", user)
		case k < 60:
			kubelet := "system:node:" + node
			value = fleetEvent(id, cluster, node, "ResponseComplete", "patch", kubelet, refNodeStatus, 200, annAllowed,
				`{"status":{"nodeInfo":{"kubeProxyVersion":"v1.30.2"}}}`, at)
			in.want.add(cluster, "field:kube-proxy-version", kubelet)
		case k < 150:
			// The first stage of a deprecated request: never counted.
			value = fleetEvent(id, cluster, node, "ResponseStarted", "watch", user, refEndpoints, 200, "", "", at)
			counts = false
		default:
			value = fleetEvent(id, cluster, node, "ResponseComplete", verb, user, refPods, 200, annAllowed, "", at)
			counts = false
		}
		in.msgs = append(in.msgs, kafkago.Message{Key: []byte(id), Value: value})
		if counts && rng.IntN(8) == 0 {
			later = append(later, kafkago.Message{Key: []byte(id + "/resent"), Value: value})
			in.copies++
		}
		// Copies go out a while after their original, spread through the
		// stream.
		if len(later) > 0 && rng.IntN(40) == 0 {
			in.msgs = append(in.msgs, later...)
			later = nil
		}
	}
	in.msgs = append(in.msgs, later...)
	return in
}

// getJSON decodes url's answer; a non-200 is an error.
func getJSON(u string, out any) error {
	resp, err := http.Get(u)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		return fmt.Errorf("GET %s: %d", u, resp.StatusCode)
	}
	return json.NewDecoder(resp.Body).Decode(out)
}

// fleetAnswer reads a replica's answers for every cluster through its JSON
// API: each API of the cluster, and the kube-proxy-version field rule,
// with its users over the last day.
func fleetAnswer(base string, clusters []string) (fleetCounts, error) {
	got := fleetCounts{}
	type users struct {
		Status struct {
			Window struct {
				ByUser []struct {
					Username     string
					RequestCount int64
				}
			}
		}
	}
	read := func(path, cluster, name string) error {
		var obj users
		err := getJSON(base+path+"?users=100&since=24h&cluster="+url.QueryEscape(cluster), &obj)
		if err != nil {
			return err
		}
		for _, u := range obj.Status.Window.ByUser {
			got[cluster+" "+name+" "+u.Username] += u.RequestCount
		}
		return nil
	}
	for _, cluster := range clusters {
		var list struct {
			Items []struct{ Metadata struct{ Name string } }
		}
		if err := getJSON(base+"/apis/sunset.dev/v1/apirequestcounts?cluster="+url.QueryEscape(cluster), &list); err != nil {
			return nil, err
		}
		for _, it := range list.Items {
			if err := read("/apis/sunset.dev/v1/apirequestcounts/"+it.Metadata.Name, cluster, it.Metadata.Name); err != nil {
				return nil, err
			}
		}
		if err := read("/apis/sunset.dev/v1/fieldrequestcounts/kube-proxy-version", cluster, "field:kube-proxy-version"); err != nil {
			return nil, err
		}
	}
	for k, n := range got {
		if n == 0 {
			delete(got, k)
		}
	}
	return got, nil
}

// topicCounts reads every record of the fleet's topic (its JSON, not
// Sunset's decoder) and counts each cluster's distinct requests.
func topicCounts(t *testing.T, brokers []string, topic string) fleetCounts {
	t.Helper()
	out := fleetCounts{}
	seen := map[string]bool{}
	conn, err := kafkago.Dial("tcp", brokers[0])
	require.NoError(t, err)
	parts, err := conn.ReadPartitions(topic)
	conn.Close()
	require.NoError(t, err)
	for _, p := range parts {
		leader, err := kafkago.DialLeader(context.Background(), "tcp", brokers[0], topic, p.ID)
		require.NoError(t, err)
		end, err := leader.ReadLastOffset()
		leader.Close()
		require.NoError(t, err)
		r := kafkago.NewReader(kafkago.ReaderConfig{Brokers: brokers, Topic: topic, Partition: p.ID})
		for off := int64(0); off < end; off++ {
			m, err := r.ReadMessage(context.Background())
			require.NoError(t, err)
			var rec struct{ Cluster, ID, API, User string }
			require.NoError(t, json.Unmarshal(m.Value, &rec))
			if !seen[rec.Cluster+"/"+rec.ID] {
				seen[rec.Cluster+"/"+rec.ID] = true
				out.add(rec.Cluster, rec.API, rec.User)
			}
			off = m.Offset
		}
		r.Close()
	}
	return out
}

// warnings keeps a process's log lines above info.
func warnings(log string) string {
	var out []string
	for _, l := range strings.Split(log, "\n") {
		if !strings.Contains(l, `"level":"info"`) && !strings.Contains(l, `"level":"debug"`) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// gaugeSeries reads every series of a process's /metrics that starts with
// prefix, as text, and the sum of their values.
func gaugeSeries(base, prefix string) (string, float64, error) {
	resp, err := http.Get(base + "/metrics")
	if err != nil {
		return "", 0, err
	}
	defer resp.Body.Close()
	var lines []string
	var sum float64
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if strings.HasPrefix(sc.Text(), prefix) {
			lines = append(lines, sc.Text())
			i := strings.LastIndexByte(sc.Text(), ' ')
			v, err := strconv.ParseFloat(sc.Text()[i+1:], 64)
			if err != nil {
				return "", 0, err
			}
			sum += v
		}
	}
	return strings.Join(lines, "\n"), sum, sc.Err()
}

// metricSeries reads one series of a process's /metrics, e.g.
// `sunset_fleet_caught_up`.
func metricSeries(base, series string) (float64, error) {
	resp, err := http.Get(base + "/metrics")
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), series+" "); ok {
			return strconv.ParseFloat(v, 64)
		}
	}
	return 0, fmt.Errorf("%s has no series %s", base, series)
}

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
