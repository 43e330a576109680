package aggregate_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"github.com/kube-sunset/sunset/aggregate"
	"github.com/kube-sunset/sunset/classify"
	"github.com/kube-sunset/sunset/countkey"
	"github.com/kube-sunset/sunset/ingest/auditjson"
	"github.com/kube-sunset/sunset/internal/testutil/auditgen"
	"github.com/kube-sunset/sunset/store"
)

// benchBatch is the 400-event batch of the ingest benchmarks (~1.2 KB
// Metadata events from internal/testutil/auditgen, fresh auditIDs), decoded in full:
// every DeprecatedEvery-th event deprecated, none when it is 0.
func benchBatch(b *testing.B, at time.Time, deprecatedEvery int) (events []classify.Event, deprecated int) {
	b.Helper()
	opts := auditgen.Options{Prefix: "bench", DeprecatedEvery: deprecatedEvery, At: at}
	events, bad, err := auditjson.DecodeBody(opts.List(0, 400))
	if err != nil || bad.Count > 0 || len(events) != 400 {
		b.Fatalf("decoding the batch: %d events, %d bad, %v", len(events), bad.Count, err)
	}
	return events, opts.CountDeprecated(0, 400)
}

var benchOrigin = classify.Origin{Source: "bench", Cluster: "default", Node: "master-0"}

// reportEvents reports the events classified per second over n batches.
func reportEvents(b *testing.B, n int) {
	b.ReportMetric(float64(400*n)/b.Elapsed().Seconds(), "events/s")
}

// copyBaseline is the floor of both benchmarks: the batch copied and its
// deprecated events added up, which any classification must at least do.
func copyBaseline(b *testing.B, events []classify.Event, want int) {
	buf := make([]classify.Event, len(events))
	n := 0
	for b.Loop() {
		copy(buf, events)
		got := 0
		for i := range buf {
			if buf[i].Deprecated {
				got++
			}
		}
		if got != want {
			b.Fatalf("%d deprecated events, want %d", got, want)
		}
		n++
	}
	reportEvents(b, n)
}

// BenchmarkPlan classifies a 400-event batch, 3 % deprecated, without a
// store (a client-side dry run): what Ingest does before it commits.
//
//   - copy, the floor: the batch copied and its deprecated events added up;
//   - none-deprecated: the same batch shape with nothing deprecated, so
//     every event is set aside by the catalog;
//   - sunset: the batch with 13 deprecated events, each of which must be
//     counted.
func BenchmarkPlan(b *testing.B) {
	at := time.Date(2026, 11, 24, 10, 0, 0, 0, time.UTC)
	events, want := benchBatch(b, at, 33)
	quiet, _ := benchBatch(b, at, 0)
	a := aggregate.New(aggregate.Options{Logger: zerolog.Nop(), Now: func() time.Time { return at.Add(30 * time.Minute) }})
	plan := func(b *testing.B, events []classify.Event, want int) {
		n := 0
		for b.Loop() {
			out, err := a.Plan(benchOrigin, events)
			if err != nil {
				b.Fatal(err)
			}
			counted := 0
			for i := range out {
				if out[i].Result == classify.ResultCounted {
					counted++
				}
			}
			if len(out) != len(events) || counted != want {
				b.Fatalf("%d of %d events counted, want %d", counted, len(out), want)
			}
			n++
		}
		reportEvents(b, n)
	}
	b.Run("copy", func(b *testing.B) { copyBaseline(b, events, want) })
	b.Run("none-deprecated", func(b *testing.B) { plan(b, quiet, 0) })
	b.Run("sunset", func(b *testing.B) { plan(b, events, want) })
}

// BenchmarkIngest ingests a 400-event batch, 3 % deprecated, into a badger
// store through the aggregator's commit loop, one batch at a time, with
// fsync off (BenchmarkCommit in benchmarks/ measures commits with it):
//
//   - copy, the floor, as in BenchmarkPlan;
//   - none-deprecated: nothing counts, so nothing is committed;
//   - sunset: the 13 deprecated events, with fresh auditIDs in every batch,
//     classified, committed and counted. Each call must count exactly 13
//     and find no duplicate, and the store must then hold 13 requests per
//     batch.
func BenchmarkIngest(b *testing.B) {
	at := time.Date(2026, 11, 24, 10, 0, 0, 0, time.UTC)
	now := func() time.Time { return at.Add(30 * time.Minute) }
	events, want := benchBatch(b, at, 33)
	quiet, _ := benchBatch(b, at, 0)
	var deprecated []int
	for i := range events {
		if events[i].Deprecated {
			deprecated = append(deprecated, i)
		}
	}
	if len(deprecated) != want {
		b.Fatalf("%d events decoded as deprecated, want %d", len(deprecated), want)
	}
	open := func(b *testing.B) (*aggregate.Aggregator, *store.Store) {
		st, err := store.Open(store.Options{Dir: b.TempDir(), NoSync: true, Logger: zerolog.Nop(), Now: now})
		if err != nil {
			b.Fatal(err)
		}
		a := aggregate.New(aggregate.Options{Store: st, Logger: zerolog.Nop(), Registerer: prometheus.NewRegistry(), Now: now})
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { a.Run(ctx); close(done) }()
		b.Cleanup(func() { cancel(); <-done; _ = st.Close() })
		return a, st
	}
	b.Run("copy", func(b *testing.B) { copyBaseline(b, events, want) })
	b.Run("none-deprecated", func(b *testing.B) {
		a, _ := open(b)
		n := 0
		for b.Loop() {
			sum, err := a.Ingest(context.Background(), benchOrigin, quiet)
			if err != nil {
				b.Fatal(err)
			}
			if sum.Counted != 0 || sum.Skipped != len(quiet) {
				b.Fatalf("%+v, want every event skipped", sum)
			}
			n++
		}
		reportEvents(b, n)
	})
	b.Run("sunset", func(b *testing.B) {
		a, st := open(b)
		batch := make([]classify.Event, len(events))
		copy(batch, events)
		n := 0
		for b.Loop() {
			prefix := "bench-" + strconv.Itoa(n) + "-"
			for _, i := range deprecated {
				batch[i].ID = prefix + strconv.Itoa(i)
			}
			sum, err := a.Ingest(context.Background(), benchOrigin, batch)
			if err != nil {
				b.Fatal(err)
			}
			if sum.Counted != want || sum.Duplicates != 0 || sum.Skipped != len(batch)-want {
				b.Fatalf("%+v, want %d counted and the rest skipped", sum, want)
			}
			n++
		}
		reportEvents(b, n)
		b.StopTimer()
		var stored uint64
		hour := at.Truncate(time.Hour)
		err := st.ScanCounts(benchOrigin.Cluster, "endpoints.v1", hour, hour, func(_ countkey.CountKey, c uint64) error {
			stored += c
			return nil
		})
		if err != nil {
			b.Fatal(err)
		}
		if stored != uint64(want*n) {
			b.Fatalf("the store holds %d requests, want %d (%d batches of %d)", stored, want*n, n, want)
		}
	})
}
