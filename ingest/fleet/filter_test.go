package fleet

import (
	"context"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"
	kafkago "github.com/segmentio/kafka-go"
	"github.com/stretchr/testify/require"

	"github.com/kube-sunset/sunset/aggregate"
	"github.com/kube-sunset/sunset/classify"
	"github.com/kube-sunset/sunset/countkey"
	"github.com/kube-sunset/sunset/ingest/auditjson"
	"github.com/kube-sunset/sunset/ingest/kafka"
	"github.com/kube-sunset/sunset/internal/testutil/kafkatest"
)

// classifyRecorder is the real aggregator, noting what the filter asks it
// to classify, what the pre-filter set aside and whose reads it heard.
type classifyRecorder struct {
	*aggregate.Aggregator
	mu         sync.Mutex
	classified int
	setAside   classify.Prefiltered
	heard      map[string]bool
}

func (r *classifyRecorder) Classify(o classify.Origin, events []classify.Event) ([]countkey.Request, classify.Summary) {
	r.mu.Lock()
	r.classified += len(events)
	r.mu.Unlock()
	return r.Aggregator.Classify(o, events)
}

func (r *classifyRecorder) CountPrefiltered(source string, p classify.Prefiltered) {
	r.mu.Lock()
	r.setAside.Merge(p)
	r.mu.Unlock()
	r.Aggregator.CountPrefiltered(source, p)
}

func (r *classifyRecorder) HeardReads(cluster string, read bool) {
	r.mu.Lock()
	r.heard[cluster] = r.heard[cluster] || read
	r.mu.Unlock()
	r.Aggregator.HeardReads(cluster, read)
}

// The filter role sets aside, undecoded, the raw events that cannot count,
// as a single replica's consumer does: only the deprecated requests are
// decoded and classified, and exactly those reach the fleet's topic.
func TestFilterDecodesOnlyWhatMayCount(t *testing.T) {
	e := newOutboxEnv(t)
	brokers := kafkatest.Brokers(t)
	raw := kafkatest.Topic(t, brokers, "filter-raw", 1)
	requests := kafkatest.Topic(t, brokers, "filter-requests", 1)
	msgs := make([]kafkago.Message, 30)
	for i := range msgs {
		msgs[i].Value = e.gen.Append(nil, i)
	}
	kafkatest.Produce(t, brokers, raw, kafkago.Compression(0), msgs...)

	rec := &classifyRecorder{Aggregator: e.agg, heard: map[string]bool{}}
	off := false
	f, err := New(Options{Config: kafka.Config{Brokers: brokers, Topics: []string{raw}, GroupID: "filter-" + raw},
		Fleet:          Config{Topic: requests, Count: &off},
		DefaultCluster: "edge", Aggregator: rec, Tallies: rec, Store: e.st, Logger: zerolog.Nop(), Registerer: prometheus.NewRegistry(),
		Prefilter: auditjson.NewPrefilter(e.agg.Interest())})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- f.Run(ctx) }()
	produced := readTopic(t, brokers, requests, 10)
	cancel()
	require.NoError(t, <-done)

	var ids []string
	for _, m := range produced {
		req, err := decodeRecord(m.Value, e.at)
		require.NoError(t, err)
		ids = append(ids, req.ID)
	}
	// Every third generated event is a deprecated request.
	var want []string
	for i := 0; i < 30; i += 3 {
		want = append(want, e.id(i))
	}
	require.ElementsMatch(t, want, ids)
	rec.mu.Lock()
	defer rec.mu.Unlock()
	require.Equal(t, 10, rec.classified, "decoded and classified: the deprecated requests only")
	// The other 20 are set aside; all are reads but the lease updates
	// (events 8, 13, 23 and 28: i%5 == 3).
	require.Equal(t, classify.Prefiltered{NotDeprecated: 20, Reads: 16}, rec.setAside)
	require.Equal(t, map[string]bool{"edge": true}, rec.heard, "reads set aside are heard, for the clusters-without-reads warning")
}
