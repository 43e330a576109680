package benchmarks

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"
	kafkago "github.com/segmentio/kafka-go"

	"github.com/kube-sunset/sunset/app"
	"github.com/kube-sunset/sunset/ingest/kafka"
	"github.com/kube-sunset/sunset/internal/testutil/auditgen"
	"github.com/kube-sunset/sunset/internal/testutil/kafkatest"
	"github.com/kube-sunset/sunset/internal/testutil/testserver"
)

// Shape of the Kafka benchmark's topic. SUNSET_BENCH_KAFKA_MESSAGES
// overrides the number of messages (the figures use 300,000).
const (
	kafkaBenchMessages   = 300_000
	kafkaBenchPartitions = 4
	// kafkaWarmup is the share of the messages consumed before the clock
	// starts: start-up, the group join and the first fetches are behind.
	kafkaWarmup = 0.1
	// kafkaSample is how often progress is looked at.
	kafkaSample = 20 * time.Millisecond
)

// kafkaMix is n audit events from auditgen (about 1.2 KB at Metadata
// level, fresh auditIDs, pod-bound tokens, 3% deprecated) in the message
// shape named (auditgen.Shapes), keyed by index. It returns the messages
// and how many of them count.
func kafkaMix(n int, shape string, now time.Time) ([]kafkago.Message, int) {
	gen := auditgen.Options{Prefix: fmt.Sprintf("kafka-%x", now.UnixNano()), DeprecatedEvery: 33, At: now}
	msgs := make([]kafkago.Message, n)
	var ev []byte
	for i := range msgs {
		ev = gen.Append(ev[:0], i)
		msgs[i] = kafkago.Message{Key: []byte(strconv.Itoa(i)), Value: auditgen.Wrap(nil, shape, ev, i)}
	}
	return msgs, gen.CountDeprecated(0, n)
}

// steadyRate watches a progress counter until it reaches total and returns
// the rate between the warm-up mark and the end, and the CPU this process
// spent in between.
type steadyRate struct {
	total, warm int64
	t0, t1      time.Time
	cpu0, cpu1  time.Duration
	atWarm      int64
}

// observe records progress seen at now; it reports whether total is reached.
func (s *steadyRate) observe(progress int64, now time.Time) bool {
	if s.t0.IsZero() && progress >= s.warm {
		s.t0, s.cpu0, s.atWarm = now, processCPU(), progress
	}
	if progress >= s.total {
		s.t1, s.cpu1 = now, processCPU()
		return true
	}
	return false
}

func (s *steadyRate) messages() int64        { return s.total - s.atWarm }
func (s *steadyRate) elapsed() time.Duration { return s.t1.Sub(s.t0) }
func (s *steadyRate) cpu() time.Duration     { return s.cpu1 - s.cpu0 }

// processCPU is the user and system CPU time this process has used. The
// broker runs in this process too, so a pass's CPU per message is the
// broker's share plus the reader's; the two passes differ by what Sunset
// does beyond fetching.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		panic(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// kafkaBaselinePass reads every partition of topic from the start with a
// bare kafka-go partition reader each, with Sunset's fetch settings, and
// returns the steady-state window.
func kafkaBaselinePass(b *testing.B, cfg kafka.Config, topic string, total int) *steadyRate {
	d, err := cfg.Dialer()
	if err != nil {
		b.Fatal(err)
	}
	var progress atomic.Int64
	var wg sync.WaitGroup
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	errs := make(chan error, kafkaBenchPartitions)
	for p := range kafkaBenchPartitions {
		r := kafka.NewPartitionReader(cfg, d, topic, p, zerolog.Nop())
		if err := r.SetOffset(kafkago.FirstOffset); err != nil {
			b.Fatal(err)
		}
		wg.Go(func() {
			defer r.Close()
			for {
				if _, err := r.FetchMessage(ctx); err != nil {
					if ctx.Err() == nil {
						errs <- err
					}
					return
				}
				progress.Add(1)
			}
		})
	}
	s := &steadyRate{total: int64(total), warm: int64(float64(total) * kafkaWarmup)}
	tick := time.NewTicker(kafkaSample / 10)
	defer tick.Stop()
	for !s.observe(progress.Load(), time.Now()) {
		select {
		case err := <-errs:
			b.Fatal(err)
		case <-tick.C:
		}
	}
	cancel()
	wg.Wait()
	return s
}

// kafkaSunsetPass runs Sunset in this process on a fresh data directory
// and group until it has consumed and committed all of topic, checks that
// the counts are exact, and returns the steady-state window.
func kafkaSunsetPass(b *testing.B, cfg kafka.Config, topic string, total, counted int) *steadyRate {
	c := testserver.Config(b)
	c.Kafka.Config = cfg
	c.Kafka.GroupID = fmt.Sprintf("bench-%d", time.Now().UnixNano())
	// Only Sunset's own metrics: gathering them is how progress is seen.
	reg := prometheus.NewRegistry()
	sunset := testserver.Start(b, c, app.Options{Registry: reg})
	defer sunset.Stop()
	url := sunset.URL

	s := &steadyRate{total: int64(total), warm: int64(float64(total) * kafkaWarmup)}
	deadline := time.Now().Add(10 * time.Minute)
	profile, profiling := os.Getenv("SUNSET_BENCH_KAFKA_CPUPROFILE"), false
	for {
		consumed, countedNow := kafkaProgress(b, reg)
		// The end is when every message is consumed and every count is
		// committed.
		if countedNow < float64(counted) {
			consumed = min(consumed, float64(total-1))
		}
		end := s.observe(int64(consumed), time.Now())
		// SUNSET_BENCH_KAFKA_CPUPROFILE profiles the steady state only.
		switch {
		case end && profiling:
			pprof.StopCPUProfile()
		case profile != "" && !profiling && !s.t0.IsZero():
			f, err := os.Create(profile)
			if err != nil {
				b.Fatal(err)
			}
			defer f.Close()
			if err := pprof.StartCPUProfile(f); err != nil {
				b.Fatal(err)
			}
			profiling = true
		}
		if end {
			break
		}
		if time.Now().After(deadline) {
			b.Fatalf("after 10 minutes: %v of %d messages consumed, %v of %d counted", consumed, total, countedNow, counted)
		}
		time.Sleep(kafkaSample)
	}

	// Exact: the group has committed everything, and the counts read
	// back over HTTP are the deprecated requests produced, no more.
	for {
		ok, err := kafkatest.GroupCommitted(context.Background(), cfg.Brokers, c.Kafka.GroupID, topic, kafkaBenchPartitions)
		if err != nil {
			b.Fatal(err)
		}
		if ok {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	body := httpBody(b, url+"/metrics")
	want := fmt.Sprintf("sunset_ingest_events_total{result=\"counted\",source=\"kafka\"} %d\n", counted)
	dups := grepLines(body, `sunset_ingest_events_total{result="duplicate",source="kafka"}`)
	if !strings.Contains(body, want) || (dups != "" && !strings.HasSuffix(dups, " 0")) {
		b.Fatalf("/metrics does not say %q with no duplicates:\n%s", strings.TrimSpace(want), grepLines(body, "sunset_ingest_events_total"))
	}
	var obj struct{ Status struct{ RequestCount int64 } }
	if err := json.Unmarshal([]byte(httpBody(b, url+"/apis/sunset.dev/v1/apirequestcounts/endpoints.v1")), &obj); err != nil {
		b.Fatal(err)
	}
	if obj.Status.RequestCount != int64(counted) {
		b.Fatalf("endpoints.v1 has %d requests, want exactly %d", obj.Status.RequestCount, counted)
	}
	return s
}

// kafkaProgress is how many messages Sunset has consumed and how many
// requests it has counted, from its registry.
func kafkaProgress(b *testing.B, reg *prometheus.Registry) (consumed, counted float64) {
	families, err := reg.Gather()
	if err != nil {
		b.Fatal(err)
	}
	for _, mf := range families {
		switch mf.GetName() {
		case "sunset_kafka_messages_total":
			for _, m := range mf.GetMetric() {
				consumed += m.GetCounter().GetValue()
			}
		case "sunset_ingest_events_total":
			for _, m := range mf.GetMetric() {
				labels := map[string]string{}
				for _, l := range m.GetLabel() {
					labels[l.GetName()] = l.GetValue()
				}
				if labels["source"] == kafka.Source && labels["result"] == "counted" {
					counted += m.GetCounter().GetValue()
				}
			}
		}
	}
	return consumed, counted
}

func httpBody(b *testing.B, url string) string {
	resp, err := http.Get(url)
	if err != nil {
		b.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		b.Fatalf("GET %s: %d %v", url, resp.StatusCode, err)
	}
	return string(body)
}

func grepLines(s, substr string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, substr) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// BenchmarkKafka consumes one topic of audit events per message shape
// (auditgen.Shapes: the Event, shipper fields, fluent-bit's and Vector's
// string envelopes, AKS records; 4 partitions, 3% of the requests
// deprecated, see kafkaMix) with bare kafka-go partition readers (the
// baseline: fetching alone, with Sunset's fetch settings) and with Sunset
// (fetch, decode, count, commit to badger with fsync and to the consumer
// group), in steady state: the clock starts once a tenth of the messages
// are consumed, so start-up and the group join are not measured, and
// stops when the last message is consumed and every count committed. Each
// Sunset iteration checks that the count read back over HTTP is exactly
// the deprecated requests produced.
//
// sunset also runs a baseline pass before each of its own and reports
// baseline-msgs/s and the ratio sunset/baseline from the same run. Both
// report the process's CPU per message over the steady window, the
// in-process broker's share included; extra-cpu-us/msg is Sunset's work
// beyond fetching, which a moving baseline rate does not blur. Each
// shape has a broker of its own, closed after it, so that only one
// shape's messages are held in memory.
func BenchmarkKafka(b *testing.B) {
	total := kafkaBenchMessages
	if env := os.Getenv("SUNSET_BENCH_KAFKA_MESSAGES"); env != "" {
		n, err := strconv.Atoi(env)
		if err != nil || n < 1000 {
			b.Fatalf("SUNSET_BENCH_KAFKA_MESSAGES=%q: want a number of at least 1000", env)
		}
		total = n
	}
	// report gives the runs' rate and their CPU per message; prefix names
	// the baseline's metrics in the sunset benchmark.
	report := func(b *testing.B, runs []*steadyRate, prefix string) (rate, cpuPerMsg float64) {
		var n int64
		var d, cpu time.Duration
		for _, r := range runs {
			n += r.messages()
			d += r.elapsed()
			cpu += r.cpu()
		}
		rate, cpuPerMsg = float64(n)/d.Seconds(), float64(cpu.Nanoseconds())/1e3/float64(n)
		b.ReportMetric(rate, prefix+"msgs/s")
		b.ReportMetric(cpuPerMsg, prefix+"cpu-us/msg")
		b.ReportMetric(cpu.Seconds()/d.Seconds(), prefix+"cores")
		return rate, cpuPerMsg
	}
	for _, shape := range auditgen.Shapes {
		b.Run(shape, func(b *testing.B) {
			brokers := kafkatest.Brokers(b)
			topic := kafkatest.Topic(b, brokers, "bench", kafkaBenchPartitions)
			msgs, counted := kafkaMix(total, shape, time.Now().UTC())
			start := time.Now()
			for i := 0; i < len(msgs); i += 50_000 {
				kafkatest.Produce(b, brokers, topic, kafkago.Compression(0), msgs[i:min(i+50_000, len(msgs))]...)
			}
			size := 0
			for _, m := range msgs {
				size += len(m.Value)
			}
			b.Logf("produced %d messages (%d deprecated, %.0f bytes each on average) in %s", total, counted, float64(size)/float64(total), time.Since(start).Round(time.Millisecond))
			msgs = nil
			cfg := kafka.Config{Brokers: brokers, Topics: []string{topic}, SessionTimeout: 2 * time.Second}.WithDefaults()
			b.Run("kafka-go-readers", func(b *testing.B) {
				var runs []*steadyRate
				for b.Loop() {
					runs = append(runs, kafkaBaselinePass(b, cfg, topic, total))
				}
				report(b, runs, "")
			})
			b.Run("sunset", func(b *testing.B) {
				var base, runs []*steadyRate
				for b.Loop() {
					base = append(base, kafkaBaselinePass(b, cfg, topic, total))
					runs = append(runs, kafkaSunsetPass(b, cfg, topic, total, counted))
				}
				br, bcpu := report(b, base, "baseline-")
				sr, scpu := report(b, runs, "")
				b.ReportMetric(sr/br, "sunset/baseline")
				// What Sunset's work beyond fetching costs a message:
				// with both cores busy, the rate ratio cannot pass
				// bcpu/(bcpu+extra).
				b.ReportMetric(scpu-bcpu, "extra-cpu-us/msg")
			})
		})
	}
}
