package file

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"
	"github.com/stretchr/testify/require"

	"github.com/kube-sunset/sunset/classify"
	"github.com/kube-sunset/sunset/ingest/auditjson"
	"github.com/kube-sunset/sunset/internal/testutil/auditcount"
	"github.com/kube-sunset/sunset/internal/testutil/ingesttest"
)

// followed is what following a file made of it.
type followed struct {
	byAPI   map[string]uint64
	reasons map[string]int
	// aside is how many events the pre-filter set aside.
	aside int
	// events is sunset_ingest_events_total, the aggregator's summary of
	// every event by result, in exposition text.
	events string
}

// reasonCounter is a Counter that keeps the reasons of the lines it was
// told were not audit events.
type reasonCounter struct {
	*ingesttest.Counter
	mu      sync.Mutex
	reasons map[string]int
	aside   int
}

func (r *reasonCounter) CountPrefiltered(source string, p classify.Prefiltered) {
	r.mu.Lock()
	r.aside += p.OtherStage + p.NotDeprecated
	r.mu.Unlock()
	r.Counter.CountPrefiltered(source, p)
}

func (r *reasonCounter) CountDecodeError(source, reason string, n int) {
	r.mu.Lock()
	r.reasons[reason] += n
	r.mu.Unlock()
	r.Counter.CountDecodeError(source, reason, n)
}

// follow follows path to its end into a fresh store, with the pre-filter
// or without, and reads back the requests to apis.
func follow(t *testing.T, path string, prefilter bool, apis []string) followed {
	t.Helper()
	reg := prometheus.NewRegistry()
	c := &reasonCounter{Counter: ingesttest.NewCounter(t, t.TempDir(), func() time.Time { return followNow }, reg), reasons: map[string]int{}}
	o := FollowOptions{Path: path, Cluster: "c", Node: "n", Ingester: c, Tallies: c, Cursors: c, Logger: zerolog.Nop(), Poll: 5 * time.Millisecond}
	if prefilter {
		o.Prefilter = auditjson.NewPrefilter(c.Interest())
	}
	end := completeLines(t, path)
	done := make(chan struct{})
	var once sync.Once
	o.OnCommit = func(offset int64) {
		if offset == end {
			once.Do(func() { close(done) })
		}
	}
	f := NewFollower(o)
	ctx, cancel := context.WithCancel(context.Background())
	stopped := make(chan error, 1)
	go func() { stopped <- f.Run(ctx) }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("the follower did not reach the end of the file within 30s")
	}
	cancel()
	require.ErrorIs(t, <-stopped, context.Canceled)

	out := followed{byAPI: map[string]uint64{}, reasons: c.reasons, aside: c.aside}
	for _, api := range apis {
		n, err := c.Requests("c", api, followNow.Add(-24*time.Hour), followNow)
		require.NoError(t, err)
		out.byAPI[api] = n
	}
	mfs, err := reg.Gather()
	require.NoError(t, err)
	var b strings.Builder
	for _, mf := range mfs {
		if mf.GetName() != "sunset_ingest_events_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				b.WriteString(l.GetName() + "=" + l.GetValue() + " ")
			}
			b.WriteString(strconv.FormatFloat(m.GetCounter().GetValue(), 'f', -1, 64) + "\n")
		}
	}
	out.events = b.String()
	return out
}

// A followed file counts the same with the pre-filter as without: the
// same requests, the same lines refused for the same reasons, and the
// aggregator's summary of every event by result the same, those set aside
// undecoded included. The counts are those of the independent count.
func TestFollowPrefilteredAgreesWithTheFullDecode(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "audit.log")
	lines := ingesttest.CapturedLines(t, "../../testdata")
	want := auditcount.New(auditcount.Options{Lifecycle: auditcount.BuiltinLifecycle(t)})
	var b strings.Builder
	for i, l := range lines {
		b.Write(l)
		b.WriteByte('\n')
		want.Add(t, "c", "n", l)
		if i == 10 {
			b.WriteString("not JSON\n" + `{"kind":"EventList","apiVersion":"audit.k8s.io/v1"}` + "\n")
		}
	}
	require.NoError(t, os.WriteFile(path, []byte(b.String()), 0o600))
	byAPI := want.ByAPI(auditcount.Last24h(followNow))
	require.NotEmpty(t, byAPI)
	var apis []string
	for api := range byAPI {
		apis = append(apis, api)
	}

	full := follow(t, path, false, apis)
	filtered := follow(t, path, true, apis)
	require.Zero(t, full.aside)
	require.Equal(t, 101, filtered.aside, "of the 112 events that cannot count; the rest, which it cannot be sure of, it leaves to the decoder")
	filtered.aside = 0
	require.Equal(t, full, filtered)
	for api, n := range byAPI {
		require.Equal(t, uint64(n), full.byAPI[api], api)
	}
	require.Equal(t, map[string]int{"malformed_json": 1, "wrong_kind": 1}, full.reasons)
	require.Equal(t, "result=counted source=file 144\nresult=duplicate source=file 0\nresult=expired source=file 1\n"+
		"result=invalid source=file 2\nresult=not_deprecated source=file 50\nresult=skipped_stage source=file 62\n", full.events,
		"the events set aside are summarised as the aggregator would have")
}
