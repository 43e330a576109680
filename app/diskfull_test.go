package app_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/rs/zerolog"
	kafkago "github.com/segmentio/kafka-go"
	"github.com/stretchr/testify/require"

	"github.com/kube-sunset/sunset/app"
	"github.com/kube-sunset/sunset/config"
	"github.com/kube-sunset/sunset/internal/testutil/kafkatest"
	"github.com/kube-sunset/sunset/store"
)

// smallFilesystem mounts a tmpfs of size on a new directory for the test,
// or skips the test where mounting is not allowed.
func smallFilesystem(t *testing.T, size string) string {
	t.Helper()
	dir := t.TempDir()
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, "size="+size); err != nil {
		t.Skipf("mounting a %s tmpfs on %s needs root (CAP_SYS_ADMIN), and it failed: %v; this test fills a real filesystem", size, dir, err)
	}
	t.Cleanup(func() { require.NoError(t, syscall.Unmount(dir, 0)) })
	return dir
}

func freeBytes(t *testing.T, dir string) int64 {
	t.Helper()
	var fs syscall.Statfs_t
	require.NoError(t, syscall.Statfs(dir, &fs))
	return int64(fs.Bavail) * fs.Bsize
}

// fullBatch is 400 deprecated requests of its own, each by a user of its
// own whose name is 512 bytes (the most Sunset keeps) that do not compress:
// badger keeps about 500 KiB of counts, dedupe marks and workload records
// for it.
func fullBatch(i int) []byte {
	var b strings.Builder
	b.WriteString(`{"kind":"EventList","apiVersion":"audit.k8s.io/v1","metadata":{},"items":[`)
	for j := 0; j < 400; j++ {
		if j > 0 {
			b.WriteByte(',')
		}
		var name []byte
		for k := 0; k < 8; k++ {
			sum := sha256.Sum256([]byte(fmt.Sprint(i, j, k)))
			name = hex.AppendEncode(name, sum[:])
		}
		fmt.Fprintf(&b, `{"level":"Metadata","auditID":"%08d-0000-4000-8000-%012d","stage":"ResponseComplete","requestURI":"/api/v1/namespaces/default/endpoints","verb":"list","user":{"username":"%s","groups":["system:authenticated"]},"sourceIPs":["10.0.0.7"],"userAgent":"kubectl/v1.32.4","objectRef":{"resource":"endpoints","namespace":"default","apiVersion":"v1"},"responseStatus":{"metadata":{},"code":200},"requestReceivedTimestamp":"2026-11-21T19:10:00.000001Z","stageTimestamp":"2026-11-21T19:10:00.020001Z","annotations":{"k8s.io/deprecated":"true"}}`,
			i, j, name)
	}
	b.WriteString("]}")
	return []byte(b.String())
}

// A full disk stops Sunset taking batches before badger writes, instead of
// killing it: it answers 503 with Retry-After, turns not ready, counts the
// refusals, and the followed file and the Kafka consumer pause. Nothing it
// acknowledged is lost, and once there is room again everything re-sent
// counts exactly once.
func TestFullDiskRefusesAndRecovers(t *testing.T) {
	fsDir := smallFilesystem(t, "96m")
	logDir := t.TempDir()
	logPath := filepath.Join(logDir, "audit.log")
	brokers := kafkatest.Brokers(t)
	topic := kafkatest.Topic(t, brokers, "full", 2)

	cfg := testConfig(t)
	cfg.DataDir = filepath.Join(fsDir, "data")
	cfg.Ingest.Files = []config.FollowFile{{Path: logPath, Node: "master-0"}}
	// Every batch writes rows of new clients, as the test needs to fill the
	// disk: no folding into client "other".
	cfg.MaxClientsPerNodeHour = 1 << 20
	kafkaConfig(&cfg, brokers, topic, "full-"+topic)
	cfg.Kafka.RetryBackoff = 100 * time.Millisecond
	logs := newLogLines(t)
	s := startWith(t, cfg, func(o *app.Options) { o.Logger = zerolog.New(logs).Level(zerolog.DebugLevel) })

	// Something else fills the filesystem until 12 MiB above the reserve
	// are left, more than a memtable: then batches take what remains, and
	// badger flushes a memtable to a table on the way.
	filler := filepath.Join(fsDir, "filler")
	require.NoError(t, os.WriteFile(filler, make([]byte, freeBytes(t, fsDir)-store.DiskReserve-12<<20), 0o600))

	// Batches until three in a row are refused. Badger's own compactions
	// can free some room meanwhile, and a batch may then be taken again.
	var acked, refused []int
	var refusal *http.Response
	episodes := 0 // runs of refusals, each logged once
	for i, inARow := 0, 0; inARow < 3; i++ {
		require.Less(t, i, 100, "12 MiB cannot take 100 batches")
		resp, err := http.Post(s.url+"/audit/webhook/n1", "application/json", bytes.NewReader(fullBatch(i)))
		require.NoError(t, err)
		var body struct{ Message string }
		require.NoError(t, json.NewDecoder(resp.Body).Decode(&body))
		resp.Body.Close()
		switch resp.StatusCode {
		case http.StatusOK:
			acked, inARow = append(acked, i), 0
		case http.StatusServiceUnavailable:
			if inARow == 0 {
				episodes++
			}
			refused, inARow, refusal = append(refused, i), inARow+1, resp
			require.Equal(t, "sunset's data directory is short of disk space; nothing of the batch was stored, retry later", body.Message)
		default:
			t.Fatalf("batch %d: %s", i, resp.Status)
		}
	}
	require.Equal(t, "10", refusal.Header.Get("Retry-After"))
	require.NotEmpty(t, acked)
	t.Logf("%d batches taken in the last 12 MiB above the reserve, %d refused", len(acked), len(refused))
	// The other writer takes more, down to half the reserve: more than
	// badger could give back by compacting what it holds.
	grow, err := os.OpenFile(filler, os.O_APPEND|os.O_WRONLY, 0)
	require.NoError(t, err)
	_, err = grow.Write(make([]byte, freeBytes(t, fsDir)-store.DiskReserve/2))
	require.NoError(t, err)
	require.NoError(t, grow.Close())

	code, body := s.get("/-/ready")
	require.Equal(t, http.StatusServiceUnavailable, code)
	require.Equal(t, "Sunset is not ready: disk\n", string(body), "a probe learns only the reason")
	code, body = s.get("/-/ready?verbose")
	require.Equal(t, http.StatusServiceUnavailable, code)
	require.Regexp(t, `^Sunset is not ready: disk: only \d+\.\d MiB free on the filesystem of `+cfg.DataDir+
		`, below the 64\.0 MiB reserve badger needs to write safely; free space or grow the volume, Sunset resumes by itself\n$`, string(body))
	require.NoError(t, testutil.GatherAndCompare(s.reg, strings.NewReader(fmt.Sprintf(`
# HELP sunset_ready 1 while Sunset accepts and commits audit events (/-/ready answers 200), 0 while starting, shutting down, short of disk space or out of its Kafka group.
# TYPE sunset_ready gauge
sunset_ready 0
# HELP sunset_store_disk_full 1 while the data directory's filesystem has less free space than the reserve: batches get 503, Kafka and followed files pause.
# TYPE sunset_store_disk_full gauge
sunset_store_disk_full 1
# HELP sunset_store_writes_refused_total Commits refused, or failed, for lack of disk space; their senders retry.
# TYPE sunset_store_writes_refused_total counter
sunset_store_writes_refused_total %d
`, len(refused))), "sunset_ready", "sunset_store_disk_full", "sunset_store_writes_refused_total"))

	// The followed file and the Kafka topic get deprecated requests of
	// their own; neither can commit, so both pause.
	var lines strings.Builder
	for i := 0; i < 300; i++ {
		lines.Write(mustJSON(ev(fmt.Sprintf("file-%d", i), "kind", "Event", "apiVersion", "audit.k8s.io/v1",
			"objectRef", map[string]any{"resource": "cronjobs", "apiGroup": "batch", "apiVersion": "v1beta1"})))
		lines.WriteByte('\n')
	}
	require.NoError(t, os.WriteFile(logPath, []byte(lines.String()), 0o600))
	var msgs []kafkago.Message
	for i := 0; i < 200; i++ {
		msgs = append(msgs, kafkago.Message{Key: []byte(fmt.Sprint(i)), Value: mustJSON(ev(fmt.Sprintf("kafka-%d", i), "kind", "Event", "apiVersion", "audit.k8s.io/v1",
			"hostname", "kafka-node", "objectRef", map[string]any{"resource": "flowschemas", "apiGroup": "flowcontrol.apiserver.k8s.io", "apiVersion": "v1beta3"}))})
	}
	kafkatest.Produce(t, brokers, topic, kafkago.Compression(0), msgs...)
	logs.wait("following paused: no room to commit")
	logs.wait("consumption paused: no room to commit")
	require.Equal(t, episodes, logs.count("not committing: the data directory is short of space; senders get 503 and retry, Kafka and followed files pause"), "said once a time")
	for _, name := range []string{"cronjobs.v1beta1.batch", "flowschemas.v1beta3.flowcontrol.apiserver.k8s.io"} {
		code, _ := s.get("/apis/sunset.dev/v1/apirequestcounts/" + name)
		require.Equal(t, http.StatusNotFound, code, name)
	}
	require.Equal(t, int64(400*len(acked)), getAPI(t, s, "endpoints.v1").Status.RequestCount, "every acknowledged batch")

	// Room again. The apiserver re-sends what was refused; send every
	// batch again: the acknowledged ones are duplicates.
	require.NoError(t, os.Remove(filler))
	code, _ = s.get("/-/ready")
	require.Equal(t, http.StatusOK, code)
	all := append(append([]int{}, acked...), refused...)
	duplicates := 0
	for _, i := range all {
		code, body := s.post("/audit/webhook/n1", "application/json", fullBatch(i))
		require.Equal(t, http.StatusOK, code, string(body))
		var r struct{ Counted, Duplicates int }
		require.NoError(t, json.Unmarshal(body, &r))
		require.Equal(t, 400, r.Counted+r.Duplicates)
		duplicates += r.Duplicates
	}
	require.Equal(t, 400*len(acked), duplicates, "exactly the acknowledged requests were already counted")
	logs.wait("the data directory has room again; committing")

	want := map[string]int64{"endpoints.v1": int64(400 * len(all)), "cronjobs.v1beta1.batch": 300, "flowschemas.v1beta3.flowcontrol.apiserver.k8s.io": 200}
	s.await(30*time.Second, func() bool { return fmt.Sprint(requestCounts(t, s)) == fmt.Sprint(want) })
	require.Equal(t, want, requestCounts(t, s), "followed file and Kafka catch up")
	require.NoError(t, testutil.GatherAndCompare(s.reg, strings.NewReader(`
# HELP sunset_store_disk_full 1 while the data directory's filesystem has less free space than the reserve: batches get 503, Kafka and followed files pause.
# TYPE sunset_store_disk_full gauge
sunset_store_disk_full 0
`), "sunset_store_disk_full"))

	// Nothing was lost on disk either.
	s = s.restart()
	require.Equal(t, want, requestCounts(t, s))
}

// requestCounts maps each API to its requestCount.
func requestCounts(t *testing.T, s *server) map[string]int64 {
	t.Helper()
	code, body := s.get("/apis/sunset.dev/v1/apirequestcounts")
	require.Equal(t, http.StatusOK, code)
	var list struct {
		Items []struct {
			Metadata struct{ Name string }
			Status   struct{ RequestCount int64 }
		}
	}
	require.NoError(t, json.Unmarshal(body, &list))
	out := map[string]int64{}
	for _, it := range list.Items {
		out[it.Metadata.Name] = it.Status.RequestCount
	}
	return out
}
