// Package fleet makes every Sunset replica answer for a whole fleet of
// clusters, exactly, with Kafka between them. Work is split in two steps,
// as Kafka Streams repartitions:
//
//   - Filter: replicas consume the raw audit topics in one consumer group
//     (package kafka does the consuming and decoding). Only the events
//     that count become records: each is reduced to its count key and who
//     was behind it, with no body, keyed by cluster and auditID, and
//     produced to the fleet's topic. The raw offsets are committed to the
//     group after the produce is acknowledged: at least once.
//   - Count: every replica reads all partitions of the fleet's topic,
//     outside any group, into its own store, with the store's dedupe and
//     each partition's offset in the same commit as its counts: exactly
//     once, so every replica holds the same full view.
//
// A Sunset fed by webhooks or files can forward what it counts to the same
// topic through a durable outbox (Forwarder).
//
// The package does not decide what counts (aggregate does, once, in the
// filter) and does not create topics.
package fleet

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"github.com/kube-sunset/sunset/aggregate"
	"github.com/kube-sunset/sunset/classify"
	"github.com/kube-sunset/sunset/countkey"
	"github.com/kube-sunset/sunset/ingest/auditjson"
	"github.com/kube-sunset/sunset/ingest/kafka"
	"github.com/kube-sunset/sunset/ingest/sink"
)

// Source is the value of the source label for requests counted from the
// fleet's topic.
const Source = "fleet"

// Aggregator classifies events and commits classified requests.
type Aggregator interface {
	Classify(origin classify.Origin, events []classify.Event) ([]countkey.Request, classify.Summary)
	Apply(ctx context.Context, source string, reqs []countkey.Request, cursors ...countkey.Cursor) (classify.Summary, error)
	Plan(origin classify.Origin, events []classify.Event) ([]aggregate.Planned, error)
}

// Store reads committed positions and keeps the forwarding outbox.
type Store interface {
	sink.CursorReader
	// ScanCursors calls fn for up to limit committed cursors whose name
	// starts with prefix, in name order.
	ScanCursors(prefix string, limit int, fn func(name string, value []byte) error) error
	CountCursors(prefix string) (int, error)
	DeleteCursors(names ...string) error
}

// Options configures New.
type Options struct {
	// Config is Kafka's settings under the kafka key.
	Config kafka.Config
	// Fleet is kafka.fleet; Fleet.Topic must be set.
	Fleet Config
	// Forward is kafka.forward: the webhook's and files' requests go to
	// the fleet's topic too (Forwarder).
	Forward        bool
	DefaultCluster string
	Aggregator     Aggregator
	// Tallies counts what the filter role's consumer could not decode or
	// set aside undecoded; nil counts nothing.
	Tallies    sink.Tallies
	Store      Store
	Logger     zerolog.Logger
	Registerer prometheus.Registerer
	// Prefilter sets aside, undecoded, the raw events the filter role
	// reads that cannot count; nil decodes every one.
	Prefilter *auditjson.Prefilter
}

// settings are the kafka key as fleet mode reads it: Kafka's settings and
// the fleet's beside them.
type settings struct {
	kafka.Config
	Fleet   Config
	Forward bool
}

// Fleet runs the roles the configuration asks for: filter (kafka.topics
// set), count (kafka.fleet.count, on by default) and forward
// (kafka.forward).
type Fleet struct {
	consumer  *kafka.Consumer
	counter   *counter
	forwarder *Forwarder
	pub       *publisher
}

// New builds the roles; call Run.
func New(o Options) (*Fleet, error) {
	cfg := settings{Config: o.Config.WithDefaults(), Fleet: o.Fleet.WithDefaults(), Forward: o.Forward}
	if !cfg.Fleet.Enabled() {
		return nil, errors.New("fleet: kafka.fleet.topic is not set")
	}
	if err := cfg.Fleet.Validate(cfg.Config, cfg.Forward); err != nil {
		return nil, err
	}
	d, err := cfg.Dialer()
	if err != nil {
		return nil, err
	}
	log := o.Logger.With().Str("component", "fleet").Logger()
	keys, err := cfg.Fleet.LoadKeys()
	if err != nil {
		return nil, err
	}
	ring := newKeyring(keys)
	if ring == nil {
		log.Warn().Str("topic", cfg.Fleet.Topic).Msg("kafka.fleet.keysFile and kafka.fleet.keys are empty: records are neither signed nor checked, so whoever may produce to the fleet's topic may write counts for any cluster")
	}
	m := newMetrics(o.Registerer)
	f := &Fleet{pub: newPublisher(cfg, d, log, m, ring)}
	if len(cfg.Topics) == 0 {
		// kafka.New does this for the filter role; the counter's and
		// the forwarder's connections need it as much.
		cfg.WarnInsecure(log)
		kafka.InstallBoundedCodecs(int64(cfg.MaxDecompressedBytes))
	} else {
		fl := &filter{agg: o.Aggregator, pub: f.pub}
		f.consumer, err = kafka.New(kafka.Options{Config: cfg.Config, DefaultCluster: o.DefaultCluster,
			Ingester: fl, Batch: fl, Tallies: o.Tallies, Cursors: noCursors{}, Logger: o.Logger, Registerer: o.Registerer,
			Prefilter: o.Prefilter})
		if err != nil {
			return nil, err
		}
	}
	if cfg.Fleet.Counts() {
		f.counter = &counter{cfg: cfg, dialer: d, agg: o.Aggregator, cursors: o.Store, log: log, metrics: m, now: time.Now, keys: ring}
	}
	if cfg.Forward {
		f.forwarder = newForwarder(o.Aggregator, o.Store, f.pub, log, m)
	}
	return f, nil
}

// Consumer is the filter role's consumer of the audit topics, for its
// readiness and poison samples; nil without kafka.topics.
func (f *Fleet) Consumer() *kafka.Consumer { return f.consumer }

// Forwarder is the ingester that forwards, for the webhook and files; nil
// without kafka.forward.
func (f *Fleet) Forwarder() *Forwarder { return f.forwarder }

// Ready reports whether the count role has counted every partition up to
// where it ended at start, and if not why, for the fleet's readiness. The
// filter role's consumer (Consumer) reports its own, as Kafka's.
func (f *Fleet) Ready() (bool, string) {
	if f.counter != nil {
		return f.counter.ready()
	}
	return true, ""
}

// Run runs every role until ctx is done. The forwarder's outbox keeps what
// was not yet produced for the next start.
func (f *Fleet) Run(ctx context.Context) error {
	var wg sync.WaitGroup
	var consumerErr error
	if f.consumer != nil {
		wg.Go(func() { consumerErr = f.consumer.Run(ctx) })
	}
	if f.counter != nil {
		wg.Go(func() { f.counter.run(ctx) })
	}
	if f.forwarder != nil {
		wg.Go(func() { f.forwarder.drain(ctx) })
	}
	wg.Wait()
	return errors.Join(consumerErr, f.pub.close())
}
