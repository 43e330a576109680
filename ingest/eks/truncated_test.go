package eks

import (
	"bufio"
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"github.com/kube-sunset/sunset/ingest/auditjson"
	"github.com/kube-sunset/sunset/internal/testutil/cloudwatchtest"
	"github.com/kube-sunset/sunset/internal/testutil/ingesttest"
)

// capturedEvent is the ResponseComplete event of auditID in the captures
// at Request level.
func capturedEvent(t *testing.T, auditID string) []byte {
	t.Helper()
	f, err := os.Open(filepath.Join(testdata, "apiserver-v1.36/request-level-blocking/audit-log-file.jsonl"))
	require.NoError(t, err)
	defer func() { _ = f.Close() }()
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 16<<20)
	for sc.Scan() {
		if l := sc.Bytes(); bytes.Contains(l, []byte(`"auditID":"`+auditID+`"`)) && bytes.Contains(l, []byte(`"stage":"ResponseComplete"`)) {
			return bytes.Clone(l)
		}
	}
	require.NoError(t, sc.Err())
	t.Fatalf("no ResponseComplete event %s in the captures", auditID)
	return nil
}

// cutAt cuts line as CloudWatch does: after n bytes, then the marker.
func cutAt(line []byte, n int) string { return string(line[:n]) + truncatedMarker }

// An event CloudWatch cut at 256 KB inside its request object loses its
// timestamps and annotations, k8s.io/deprecated among them. Its leading
// fields still name the request, the log event's time stands in for its
// own, and with the cluster's version configured it counts as deprecated
// by the catalog, as the complete event counts by its annotation. One cut
// in objectRef is read but cannot count; one cut before stage is not an
// event. All three are counted as truncated, and a poll that reads them
// again counts nothing more.
func TestTruncatedEntryCountsByTheCatalog(t *testing.T) {
	t.Parallel()
	const api = "volumeattributesclasses.v1beta1.storage.k8s.io"
	// The cluster's version lets the catalog judge a request that lost
	// its deprecation annotation; the clock is the real one, as the log
	// event times are.
	vs := ingesttest.NewCounter(t, t.TempDir(), time.Now, nil, ingesttest.WithClusterVersion("eks-test", "1.36"))
	e := newEnvWith(t, vs, time.Now())
	// bob creates a VolumeAttributesClass through storage.k8s.io/v1beta1
	// (deprecated in 1.34, removed in 1.37), with a large parameter.
	line := capturedEvent(t, "588d25ca-eb49-4b1a-a19e-2d5439b54b0a")
	full := e.independent(streamA, line)
	require.Equal(t, map[string]int64{api: 1}, full.ByAPI(nil), "the complete event counts by its annotation")
	big := bytes.Replace(line, []byte(`"parameters":{"iops":"100"}`),
		[]byte(`"parameters":{"iops":"100","padding":"`+strings.Repeat("x", 300<<10)+`"}`), 1)
	require.Greater(t, len(big), 300<<10)
	cut := cutAt(big, 256<<10)
	require.Less(t, bytes.Index(big, []byte(`"requestObject"`)), 256<<10)
	require.Greater(t, bytes.Index(big, []byte(`"requestReceivedTimestamp"`)), 256<<10, "the cut takes the timestamps and annotations")

	inRef := withAuditID(t, line, "cut-in-objectRef")
	inRefCut := cutAt(inRef, bytes.Index(inRef, []byte(`"objectRef"`))+20)
	beforeStage := withAuditID(t, line, "cut-before-stage")
	beforeStageCut := cutAt(beforeStage, bytes.Index(beforeStage, []byte(`"stage"`))+3)

	at := time.Now().Add(-10 * time.Minute).Truncate(time.Millisecond)
	e.cw.Put(t, e.group, streamA, []cloudwatchtest.Event{
		{Time: at, Message: inRefCut}, {Time: at, Message: beforeStageCut}, {Time: at, Message: cut + "\n"},
	})
	from := time.Now()
	r := e.start(nil)
	require.NoError(t, r.waitPoll(from))

	hour := at.UTC().Truncate(time.Hour)
	got, err := vs.Requests(e.cluster, api, hour, hour)
	require.NoError(t, err)
	require.Equal(t, uint64(1), got, "counted in the hour of the log event's time")
	require.Equal(t, 3.0, testutil.ToFloat64(r.src.metrics.truncated))
	require.Equal(t, 2, r.events(eventNew))
	require.Equal(t, 1, r.events(eventUnreadable))
	require.Equal(t, 1.0, testutil.ToFloat64(r.src.metrics.unreadable.WithLabelValues(string(auditjson.ReasonMissingStage))))
	_, _, _, reasons, invalid := e.rec.seen()
	require.Equal(t, map[string]int{string(auditjson.ReasonMissingStage): 1}, reasons)
	require.Equal(t, 1, invalid)

	// A sweep reads them again.
	e.advance(DefaultOverlap)
	r.pollNow()
	got, err = vs.Requests(e.cluster, api, hour, hour)
	require.NoError(t, err)
	require.Equal(t, uint64(1), got)
	require.Equal(t, 3, r.events(eventDuplicate))
	require.Equal(t, 3.0, testutil.ToFloat64(r.src.metrics.truncated), "read again, not counted again")
}

// Log events that are not audit events are passed over, each counted by
// its reason, and the events after them count.
func TestUnreadableEntriesArePassedOverByReason(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	lines := countingLines(t)
	bad := map[auditjson.Reason]string{
		auditjson.ReasonMalformedJSON:   "not JSON at all",
		auditjson.ReasonWrongAPIVersion: `{"kind":"Event","apiVersion":"audit.k8s.io/v2","auditID":"v2","stage":"ResponseComplete"}`,
		auditjson.ReasonMalformedEvent:  `["an","array"]`,
		auditjson.ReasonMissingStage:    `{"kind":"Event","apiVersion":"audit.k8s.io/v1","auditID":"no-stage"}`,
		auditjson.ReasonBadTimestamp:    `{"kind":"Event","apiVersion":"audit.k8s.io/v1","auditID":"bad-time","stage":"ResponseComplete","requestReceivedTimestamp":"yesterday"}`,
		ReasonTooLarge:                  `{"kind":"Event","padding":"` + strings.Repeat("x", maxMessageBytes) + `"}`,
	}
	msgs := make([][]byte, 0, len(lines)+len(bad))
	msgs = append(msgs, lines[:10]...)
	wantReasons := map[string]int{}
	for reason, m := range bad {
		msgs = append(msgs, []byte(m))
		wantReasons[string(reason)] = 1
	}
	msgs = append(msgs, lines[10:]...)
	e.cw.Put(t, e.group, streamA, events(time.Now().Add(-10*time.Minute), msgs))
	want := e.independent(streamA, lines...)

	from := time.Now()
	r := e.start(nil)
	require.NoError(t, r.waitPoll(from))
	e.requireCounts(want)
	_, _, _, reasons, invalid := e.rec.seen()
	require.Equal(t, wantReasons, reasons)
	require.Equal(t, len(bad), invalid)
	require.Equal(t, len(bad), r.events(eventUnreadable))
	require.Equal(t, len(lines), r.events(eventNew))
	for reason := range bad {
		require.Equal(t, 1.0, testutil.ToFloat64(r.src.metrics.unreadable.WithLabelValues(string(reason))), reason)
	}
	ok, why := r.src.Ready()
	require.True(t, ok, why)
}

// recoverTruncated keeps the complete top-level fields, in order, and
// drops a number that runs to the cut, which may have lost digits.
func TestRecoverTruncated(t *testing.T) {
	t.Parallel()
	ts := time.Date(2026, 11, 21, 19, 24, 7, 123e6, time.UTC).UnixMilli()
	for _, c := range []struct{ name, head, want string }{
		{"cut in a string", `{"kind":"Event","auditID":"a","stage":"ResponseComplete","requestObject":{"x":"yy`,
			`{"kind":"Event","auditID":"a","stage":"ResponseComplete","requestReceivedTimestamp":"2026-11-21T19:24:07.123Z","stageTimestamp":"2026-11-21T19:24:07.123Z"}`},
		{"cut in a key", `{"kind":"Event","verb":"get","requestObj`,
			`{"kind":"Event","verb":"get","requestReceivedTimestamp":"2026-11-21T19:24:07.123Z","stageTimestamp":"2026-11-21T19:24:07.123Z"}`},
		{"a number up to the cut", `{"kind":"Event","n":40`, `{"kind":"Event","requestReceivedTimestamp":"2026-11-21T19:24:07.123Z","stageTimestamp":"2026-11-21T19:24:07.123Z"}`},
		{"a number before it", `{"n":404,"kind":"Ev`, `{"n":404,"requestReceivedTimestamp":"2026-11-21T19:24:07.123Z","stageTimestamp":"2026-11-21T19:24:07.123Z"}`},
		{"timestamps kept", `{"requestReceivedTimestamp":"2026-11-21T19:00:00Z","annotations":{"k8s.io/dep`,
			`{"requestReceivedTimestamp":"2026-11-21T19:00:00Z"}`},
		{"nothing complete", `{"ki`, `{"requestReceivedTimestamp":"2026-11-21T19:24:07.123Z","stageTimestamp":"2026-11-21T19:24:07.123Z"}`},
	} {
		got, err := recoverTruncated(c.head, ts)
		require.Nil(t, err, c.name)
		require.JSONEq(t, c.want, string(got), c.name)
		require.Equal(t, c.want, string(got), c.name)
	}
	_, err := recoverTruncated(`["not an object`, ts)
	require.Equal(t, auditjson.ReasonMalformedJSON, err.Reason)
}
