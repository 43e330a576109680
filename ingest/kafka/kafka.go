// Package kafka consumes audit events from Kafka topics with exactly-once
// counts.
//
// Shippers (fluent-bit, Vector, fluentd, Azure Event Hubs) put audit events
// in several shapes; decode recognises them. Each partition's position is
// committed to badger in the same transaction as the counts it produced, and
// consumption resumes from there, so a crash at any instant neither loses a
// message nor counts one twice. Offsets are also committed to the consumer
// group, for lag tools and for replicas that take a partition over.
package kafka

import (
	"cmp"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"
	kafkago "github.com/segmentio/kafka-go"

	"github.com/kube-sunset/sunset/aggregate"
	"github.com/kube-sunset/sunset/ingest/auditjson"
	"github.com/kube-sunset/sunset/internal/agegauge"
	"github.com/kube-sunset/sunset/internal/backoff"
)

// Source is the value of the source label for events from Kafka.
const Source = "kafka"

// maxPoisonSamples bounds the kept samples of poison messages.
const maxPoisonSamples = 100

// Ingester commits events with the positions they were read up to.
type Ingester interface {
	IngestAt(ctx context.Context, origin aggregate.Origin, events []aggregate.Event, cursors ...aggregate.Cursor) (aggregate.Summary, error)
	CountInvalid(source string, n int)
}

// OriginEvents is the events of one batch that share an origin.
type OriginEvents struct {
	Origin aggregate.Origin
	Events []aggregate.Event
}

// BatchIngester is an Ingester that takes a whole batch in one call, so
// that one batch can be one round trip however many origins it holds. The
// batch's offsets are committed to the group only after it returns nil.
type BatchIngester interface {
	Ingester
	IngestBatch(ctx context.Context, groups []*OriginEvents, cursor aggregate.Cursor) error
}

// PrefilterCounter is an Ingester that also tallies the events the
// pre-filter set aside undecoded (the aggregator does).
type PrefilterCounter interface {
	CountPrefiltered(source string, p aggregate.Prefiltered)
	// HeardReads notes that cluster sent events the pre-filter set
	// aside, reads among them when read is true, so that a cluster whose
	// reads are not logged is told from one that reads.
	HeardReads(cluster string, read bool)
}

// CursorReader reads a committed position back.
type CursorReader interface {
	Cursor(name string) ([]byte, bool, error)
}

// Options configures New.
type Options struct {
	Config         Config
	DefaultCluster string
	Ingester       Ingester
	Cursors        CursorReader
	Logger         zerolog.Logger
	Registerer     prometheus.Registerer
	// Prefilter sets aside, undecoded, the events that cannot count; nil
	// decodes every event.
	Prefilter *auditjson.Prefilter
}

// PoisonSample describes a skipped message without its content.
type PoisonSample struct {
	Reason    string `json:"reason"`
	Topic     string `json:"topic"`
	Partition int    `json:"partition"`
	Offset    int64  `json:"offset"`
	// Messages is how many messages from Offset on it stands for: 1, or
	// the rest of a record batch too large to decompress (too_large).
	Messages int64     `json:"messages"`
	Time     time.Time `json:"time"`
}

// Consumer is a member of the consumer group.
type Consumer struct {
	cfg            Config
	defaultCluster string
	ingester       Ingester
	cursors        CursorReader
	log            zerolog.Logger
	metrics        *metrics
	age            *agegauge.Gauge
	decoder        *decoder
	dialer         *kafkago.Dialer

	// prepared, if set, is called each time a fetched batch is decoded
	// and handed to its commit: a hook for tests.
	prepared func(topic string, partition int, next int64)

	mu        sync.Mutex
	connected bool
	lastErr   string
	poison    []PoisonSample
}

// New builds a consumer; call Run.
func New(o Options) (*Consumer, error) {
	cfg := o.Config.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	d, err := cfg.Dialer()
	if err != nil {
		return nil, err
	}
	log := o.Logger.With().Str("component", "kafka").Logger()
	cfg.WarnInsecure(log)
	SetMaxDecompressedBytes(int64(cfg.MaxDecompressedBytes))
	age := agegauge.New(topicAgeDesc, time.Now)
	for _, t := range cfg.Topics {
		age.Expect(t)
	}
	if o.Registerer != nil {
		o.Registerer.MustRegister(age)
	}
	return &Consumer{cfg: cfg, defaultCluster: o.DefaultCluster, ingester: o.Ingester, cursors: o.Cursors,
		log: log, metrics: newMetrics(o.Registerer), age: age,
		decoder: newDecoder(cfg, o.Prefilter), dialer: d, lastErr: "not connected yet"}, nil
}

// Ready reports whether the consumer is in its group, and why not.
func (c *Consumer) Ready() (bool, string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.connected, c.lastErr
}

// Poison returns the recent poison messages, oldest first.
func (c *Consumer) Poison() []PoisonSample {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]PoisonSample(nil), c.poison...)
}

func (c *Consumer) setState(connected bool, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.connected = connected
	c.lastErr = ""
	if err != nil {
		c.lastErr = err.Error()
	}
	if connected {
		c.metrics.connected.Set(1)
	} else {
		c.metrics.connected.Set(0)
	}
}

// Run consumes until ctx is done. Connection and authentication failures
// are logged, shown by Ready, and retried with backoff; none of them ends
// Run, so that a broker outage does not stop the rest of the server.
func (c *Consumer) Run(ctx context.Context) error {
	retry := backoff.New(time.Second, 30*time.Second)
	for {
		err := c.runGroup(ctx)
		if ctx.Err() != nil {
			c.setState(false, errors.New("stopped"))
			return nil
		}
		c.setState(false, err)
		c.log.Error().Err(err).Strs("brokers", c.cfg.Brokers).Dur("retry_in", retry.Peek()).Msg("kafka consumer failed; check kafka.brokers, kafka.tls and kafka.sasl")
		if !retry.Wait(ctx) {
			return nil
		}
	}
}

// checkBrokers dials the brokers, so that an address or credential problem
// is reported as such rather than as a group that never forms.
func (c *Consumer) checkBrokers(ctx context.Context) error {
	var errs []error
	for _, b := range c.cfg.Brokers {
		conn, err := c.dialer.DialContext(ctx, "tcp", b)
		if err == nil {
			_, err = conn.ApiVersions()
			_ = conn.Close()
			if err == nil {
				return nil
			}
		}
		errs = append(errs, fmt.Errorf("%s: %w", b, err))
	}
	return fmt.Errorf("%w: %w", errNoBrokers, errors.Join(errs...))
}

func (c *Consumer) runGroup(ctx context.Context) error {
	if err := c.checkBrokers(ctx); err != nil {
		return err
	}
	group, err := kafkago.NewConsumerGroup(kafkago.ConsumerGroupConfig{
		ID:                c.cfg.GroupID,
		Brokers:           c.cfg.Brokers,
		Dialer:            c.dialer,
		Topics:            c.cfg.Topics,
		SessionTimeout:    c.cfg.SessionTimeout,
		RebalanceTimeout:  c.cfg.RebalanceTimeout,
		HeartbeatInterval: c.cfg.SessionTimeout / 5,
		JoinGroupBackoff:  time.Second,
		StartOffset:       c.cfg.startOffset(),
		ErrorLogger:       kafkago.LoggerFunc(func(f string, a ...any) { c.log.Warn().Msgf(f, a...) }),
	})
	if err != nil {
		return fmt.Errorf("kafka: joining group %s: %w", c.cfg.GroupID, err)
	}
	defer func() { _ = group.Close() }()
	for {
		gen, err := group.Next(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return fmt.Errorf("kafka: group %s: %w", c.cfg.GroupID, err)
		}
		c.setState(true, nil)
		assigned := 0
		oc := newOffsetCommitter(gen, c.log)
		gen.Start(oc.run)
		for topic, parts := range gen.Assignments {
			for _, pa := range parts {
				assigned++
				gen.Start(func(ctx context.Context) { c.consumePartition(ctx, oc, topic, pa) })
			}
		}
		c.log.Info().Int32("generation", gen.ID).Int("partitions", assigned).Msg("joined consumer group")
	}
}

func (c *Consumer) cursorName(topic string, partition int) string {
	return "kafka:" + c.cfg.GroupID + ":" + topic + ":" + strconv.Itoa(partition)
}

// startOffset is where a partition resumes: the later of Sunset's own
// committed position and the group's. Sunset's is ahead after a crash
// between its commit and the group commit; the group's is ahead when
// another replica consumed the partition meanwhile.
func (c *Consumer) startOffset(topic string, pa kafkago.PartitionAssignment) (int64, error) {
	raw, ok, err := c.cursors.Cursor(c.cursorName(topic, pa.ID))
	if err != nil {
		return 0, err
	}
	if ok && len(raw) == 8 {
		stored := int64(binary.BigEndian.Uint64(raw))
		if pa.Offset < 0 || stored > pa.Offset {
			return stored, nil
		}
	}
	return pa.Offset, nil
}

func (c *Consumer) consumePartition(ctx context.Context, oc *offsetCommitter, topic string, pa kafkago.PartitionAssignment) {
	log := c.log.With().Str("topic", topic).Int("partition", pa.ID).Logger()
	start, err := c.startOffset(topic, pa)
	if err != nil {
		log.Error().Err(err).Msg("reading the stored offset; the partition is not consumed in this generation")
		return
	}
	r := NewPartitionReader(c.cfg, c.dialer, topic, pa.ID, log)
	defer func() { _ = r.Close() }()
	if err := r.SetOffset(start); err != nil {
		log.Error().Err(err).Int64("offset", start).Msg("seeking")
		return
	}
	log.Debug().Int64("offset", start).Msg("consuming partition")
	if start > pa.Offset {
		// Killed after its own commit and before the group's: the group
		// learns the position now, not only when more messages come.
		oc.note(topic, pa.ID, start)
	}
	p := &partition{c: c, offsets: oc, topic: topic, id: pa.ID, label: strconv.Itoa(pa.ID), cursor: c.cursorName(topic, pa.ID)}
	runPartition(ctx, r, c.cfg, log, stages[batch]{prepare: p.prepare, merge: mergeBatches, commit: p.commit, skip: p.skip, depth: commitQueueDepth})
	// The group learns where this member stopped before the partition
	// can go to another one.
	_ = oc.flush()
}

// commitQueueDepth is how many decoded batches of a partition may wait for
// their commit before fetching waits too. A decoded batch holds only the
// events that may count, so this is cheap.
const commitQueueDepth = 32

// partition is one partition being consumed in a generation.
type partition struct {
	c                    *Consumer
	offsets              *offsetCommitter
	topic, label, cursor string
	id                   int
}

// batch is what one or more consecutive fetched batches of a partition
// hold once decoded: the events that may count, grouped by origin, and what
// the rest were.
type batch struct {
	groups   []*OriginEvents
	byOrigin map[aggregate.Origin]*OriginEvents
	// next is the offset after the last message; lag what the broker
	// still held after it, -1 when unknown (a skipped batch).
	next, lag int64
	ok        int
	invalid   int
	skipped   aggregate.Prefiltered
	// heard are the clusters of the events set aside, and whether any of
	// them read.
	heard  []heardCluster
	poison []PoisonSample
	// newest is the latest time stamped on a message of the batch.
	newest time.Time
}

type heardCluster struct {
	cluster string
	read    bool
}

// addHeard notes a cluster whose events were set aside; a batch holds few.
func (b *batch) addHeard(cluster string, read bool) {
	for i := range b.heard {
		if b.heard[i].cluster == cluster {
			b.heard[i].read = b.heard[i].read || read
			return
		}
	}
	b.heard = append(b.heard, heardCluster{cluster, read})
}

// prepare decodes a fetched batch; it runs as batches are fetched.
func (p *partition) prepare(msgs []kafkago.Message) *batch {
	c := p.c
	b := &batch{}
	for i := range msgs {
		m := &msgs[i]
		if m.Time.After(b.newest) {
			b.newest = m.Time
		}
		var d decoded
		reason := ""
		if int64(len(m.Value)) > maxDecompressed.Load() {
			// An uncompressed message over the bound of a decompressed
			// batch is poison as well.
			reason = ReasonTooLarge
		} else {
			d, reason = c.decoder.decode(m.Value)
		}
		if reason != "" {
			b.poison = append(b.poison, PoisonSample{Reason: reason, Topic: m.Topic, Partition: m.Partition, Offset: m.Offset, Messages: 1, Time: time.Now().UTC()})
			continue
		}
		b.ok++
		b.invalid += d.invalid
		b.skipped.Merge(d.skipped)
		if len(d.events) == 0 && d.skipped == (aggregate.Prefiltered{}) {
			continue
		}
		o := aggregate.Origin{Source: Source, Node: c.cfg.Node, Cluster: c.defaultCluster}
		o.Node = cmp.Or(header(m, c.cfg.NodeHeader), d.node, o.Node)
		o.Cluster = cmp.Or(header(m, c.cfg.ClusterHeader), d.cluster, o.Cluster)
		if d.skipped != (aggregate.Prefiltered{}) {
			b.addHeard(o.Cluster, d.skipped.Reads > 0)
		}
		if len(d.events) > 0 {
			b.add(o, d.events)
		}
	}
	last := msgs[len(msgs)-1]
	b.next = last.Offset + 1
	b.lag = max(last.HighWaterMark-b.next, 0)
	if c.prepared != nil {
		c.prepared(p.topic, p.id, b.next)
	}
	return b
}

// skip stands for the messages from first to next (excluded): a record
// batch that decompresses to more than kafka.maxDecompressedBytes. It is
// poison, and its commit moves the partition past it.
func (p *partition) skip(first, next int64) *batch {
	b := &batch{next: next, lag: -1, poison: []PoisonSample{{Reason: ReasonTooLarge, Topic: p.topic, Partition: p.id,
		Offset: first, Messages: next - first, Time: time.Now().UTC()}}}
	if p.c.prepared != nil {
		p.c.prepared(p.topic, p.id, b.next)
	}
	return b
}

// add appends events of origin o.
func (b *batch) add(o aggregate.Origin, events []aggregate.Event) {
	if b.byOrigin == nil {
		b.byOrigin = map[aggregate.Origin]*OriginEvents{}
	}
	g := b.byOrigin[o]
	if g == nil {
		g = &OriginEvents{Origin: o}
		b.byOrigin[o] = g
		b.groups = append(b.groups, g)
	}
	g.Events = append(g.Events, events...)
}

// mergeBatches appends next, the batch that follows, to into.
func mergeBatches(into, next *batch) {
	for _, g := range next.groups {
		into.add(g.Origin, g.Events)
	}
	into.next = next.next
	if next.newest.After(into.newest) {
		into.newest = next.newest
	}
	if next.lag >= 0 {
		into.lag = next.lag
	}
	into.ok += next.ok
	into.invalid += next.invalid
	into.skipped.Merge(next.skipped)
	for _, h := range next.heard {
		into.addHeard(h.cluster, h.read)
	}
	into.poison = append(into.poison, next.poison...)
}

// commit counts a batch and commits its end position with the counts,
// then tells the group. What the batch's messages were is told (metrics,
// poison samples) once it is committed, so a batch read again after a
// failed commit is not told twice.
func (p *partition) commit(ctx context.Context, b *batch) error {
	c := p.c
	start := time.Now()
	cursor := aggregate.Cursor{Name: p.cursor, Value: binary.BigEndian.AppendUint64(nil, uint64(b.next))}
	groups := b.groups
	if len(groups) == 0 {
		groups = []*OriginEvents{{Origin: aggregate.Origin{Source: Source, Node: c.cfg.Node, Cluster: c.defaultCluster}}}
	}
	if err := c.ingest(ctx, groups, cursor); err != nil {
		return err
	}
	if b.invalid > 0 {
		c.ingester.CountInvalid(Source, b.invalid)
	}
	if pc, ok := c.ingester.(PrefilterCounter); ok && b.skipped != (aggregate.Prefiltered{}) {
		pc.CountPrefiltered(Source, b.skipped)
		for _, h := range b.heard {
			pc.HeardReads(h.cluster, h.read)
		}
	}
	if b.ok > 0 {
		c.metrics.messages.WithLabelValues(p.topic, "ok").Add(float64(b.ok))
	}
	for _, ps := range b.poison {
		c.recordPoison(ps)
	}
	c.age.Saw(b.newest, p.topic)
	p.offsets.note(p.topic, p.id, b.next)
	c.metrics.commitDuration.Observe(time.Since(start).Seconds())
	if b.lag >= 0 {
		c.metrics.lag.WithLabelValues(p.topic, p.label).Set(float64(b.lag))
	}
	// Once counts, metrics and the position are all told: a test waits
	// for this line rather than asking again and again.
	c.log.Debug().Str("topic", p.topic).Int("partition", p.id).Int64("next", b.next).Msg("batch committed")
	return nil
}

// offsetCommitter tells the group the positions committed to badger, for
// every partition of a generation in one request at a time: requests from
// each partition at once would share the coordinator connection, on which
// kafka-go spins waiting for its own response.
type offsetCommitter struct {
	gen *kafkago.Generation
	log zerolog.Logger

	mu      sync.Mutex
	pending map[string]map[int]int64
	kick    chan struct{}
	// sending serialises the requests.
	sending sync.Mutex
}

func newOffsetCommitter(gen *kafkago.Generation, log zerolog.Logger) *offsetCommitter {
	return &offsetCommitter{gen: gen, log: log, pending: map[string]map[int]int64{}, kick: make(chan struct{}, 1)}
}

// note records that a partition is committed up to next, to be told to
// the group soon.
func (o *offsetCommitter) note(topic string, partition int, next int64) {
	o.mu.Lock()
	if o.pending[topic] == nil {
		o.pending[topic] = map[int]int64{}
	}
	o.pending[topic][partition] = next
	o.mu.Unlock()
	select {
	case o.kick <- struct{}{}:
	default:
	}
}

// groupCommitRetry is how long a failed group commit waits before it is
// tried again. The partition may have nothing more to read, so no later
// batch would carry the position to the group.
const groupCommitRetry = time.Second

// run tells the group what is noted, as it is noted, until the generation
// ends.
func (o *offsetCommitter) run(ctx context.Context) {
	var retry <-chan time.Time
	for {
		select {
		case <-ctx.Done():
			_ = o.flush()
			return
		case <-o.kick:
		case <-retry:
		}
		retry = nil
		if o.flush() != nil {
			retry = time.After(groupCommitRetry)
		}
	}
}

// flush tells the group what is noted, and returns once it has answered.
func (o *offsetCommitter) flush() error {
	o.sending.Lock()
	defer o.sending.Unlock()
	o.mu.Lock()
	offsets := o.pending
	o.pending = map[string]map[int]int64{}
	o.mu.Unlock()
	if len(offsets) == 0 {
		return nil
	}
	err := o.gen.CommitOffsets(offsets)
	if err != nil {
		// Not fatal: Sunset's own positions are committed. The group's
		// are tried again, unless newer ones were noted meanwhile.
		o.log.Warn().Err(err).Msg("committing offsets to the group")
		o.mu.Lock()
		for topic, parts := range offsets {
			for p, next := range parts {
				if _, newer := o.pending[topic][p]; !newer {
					if o.pending[topic] == nil {
						o.pending[topic] = map[int]int64{}
					}
					o.pending[topic][p] = next
				}
			}
		}
		o.mu.Unlock()
	}
	return err
}

// ingest hands a batch's groups to the ingester, in one call when it takes
// whole batches.
func (c *Consumer) ingest(ctx context.Context, groups []*OriginEvents, cursor aggregate.Cursor) error {
	if bi, ok := c.ingester.(BatchIngester); ok {
		return bi.IngestBatch(ctx, groups, cursor)
	}
	// The position goes with the last group: earlier groups committed
	// without it are recognised as duplicates if the batch is re-read.
	for i, g := range groups {
		var cursors []aggregate.Cursor
		if i == len(groups)-1 {
			cursors = []aggregate.Cursor{cursor}
		}
		if _, err := c.ingester.IngestAt(ctx, g.Origin, g.Events, cursors...); err != nil {
			return err
		}
	}
	return nil
}

func (c *Consumer) recordPoison(p PoisonSample) {
	c.metrics.messages.WithLabelValues(p.Topic, p.Reason).Add(float64(max(p.Messages, 1)))
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.poison) == maxPoisonSamples {
		c.poison = c.poison[1:]
	}
	c.poison = append(c.poison, p)
}

func header(m *kafkago.Message, name string) string {
	if name == "" {
		return ""
	}
	for _, h := range m.Headers {
		if h.Key == name {
			return string(h.Value)
		}
	}
	return ""
}
