package kafka

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"
	kafkago "github.com/segmentio/kafka-go"

	"github.com/kube-sunset/sunset/ingest/auditjson"
	"github.com/kube-sunset/sunset/ingest/sink"
	"github.com/kube-sunset/sunset/internal/agegauge"
	"github.com/kube-sunset/sunset/internal/backoff"
	"github.com/kube-sunset/sunset/internal/logbridge"
)

// maxPoisonSamples bounds the kept samples of poison messages.
const maxPoisonSamples = 100

// Options configures New.
type Options struct {
	Config         Config
	DefaultCluster string
	Ingester       sink.Ingester
	// Batch, if set, takes each batch whole instead of Ingester.IngestAt
	// per origin.
	Batch BatchIngester
	// Tallies counts what could not be decoded or was set aside
	// undecoded; nil counts nothing.
	Tallies    sink.Tallies
	Cursors    sink.CursorReader
	Logger     zerolog.Logger
	Registerer prometheus.Registerer
	// Prefilter sets aside, undecoded, the events that cannot count; nil
	// decodes every event.
	Prefilter *auditjson.Prefilter
}

// Consumer is a member of the consumer group.
type Consumer struct {
	cfg            Config
	defaultCluster string
	ingester       sink.Ingester
	batch          BatchIngester
	tallies        sink.Tallies
	cursors        sink.CursorReader
	log            zerolog.Logger
	metrics        *metrics
	age            *agegauge.Gauge
	decoder        *decoder
	dialer         *kafkago.Dialer
	watch          *groupWatch
	// topicClusters are the clusters each bound topic may speak for.
	topicClusters map[string][]string

	// prepared, if set, is called each time a fetched batch is decoded
	// and handed to its commit: a hook for tests.
	prepared func(topic string, partition int, next int64)
	// joined, if set, is called with each generation's assignment; and
	// rejoining with the partitions that no member consumes when the
	// consumer leaves its group to join again: hooks for tests.
	joined    func(generation int32, assigned map[string][]kafkago.PartitionAssignment)
	rejoining func(unconsumed map[string][]int)

	mu        sync.Mutex
	connected bool
	lastErr   string
	poison    []PoisonSample
	// assignment is the current generation's, nil between generations;
	// assigned counts its partitions.
	assignment map[string][]kafkago.PartitionAssignment
	assigned   int
	// unconsumed is what the last look at the group found no member
	// consuming, by topic.
	unconsumed map[string][]int
	// rejoinPause is the least time from one rejoin for unconsumed
	// partitions to the next, nextRejoin when that is.
	rejoinPause time.Duration
	nextRejoin  time.Time
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
	InstallBoundedCodecs(int64(cfg.MaxDecompressedBytes))
	age := agegauge.New(topicAgeDesc, time.Now)
	for _, t := range cfg.Topics {
		age.Expect(t)
	}
	if o.Registerer != nil {
		o.Registerer.MustRegister(age)
	}
	m := newMetrics(o.Registerer)
	for _, t := range cfg.Topics {
		m.unconsumed.WithLabelValues(t)
	}
	return &Consumer{cfg: cfg, defaultCluster: o.DefaultCluster, ingester: o.Ingester, batch: o.Batch, tallies: sink.OrNone(o.Tallies), cursors: o.Cursors,
		log: log, metrics: m, age: age, decoder: newDecoder(cfg, o.Prefilter), dialer: d, watch: newGroupWatch(cfg, d),
		lastErr: "not connected yet", topicClusters: cfg.topicClusterMap()}, nil
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
//
// A consumer that finds partitions no member consumes (see watchGroup)
// leaves the group and joins it again at once, staying ready meanwhile.
func (c *Consumer) Run(ctx context.Context) error {
	defer c.watch.close()
	retry := backoff.New(time.Second, 30*time.Second)
	for {
		err := c.runGroup(ctx)
		if ctx.Err() != nil {
			c.setState(false, errors.New("stopped"))
			return nil
		}
		if errors.Is(err, errRejoin) {
			retry.Reset()
			continue
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
		// kafka-go's own info is a line per join, sync and heartbeat: trace.
		Logger:      kafkago.LoggerFunc(logbridge.Printf(c.log, logbridge.KafkaGo, zerolog.TraceLevel)),
		ErrorLogger: kafkago.LoggerFunc(logbridge.Printf(c.log, logbridge.KafkaGo, zerolog.WarnLevel)),
	})
	if err != nil {
		return fmt.Errorf("kafka: joining group %s: %w", c.cfg.GroupID, err)
	}
	// Every function started in a generation has returned before the next
	// generation's start, and before runGroup returns: kafka-go waits only
	// for those started while the generation was open, and runs the others
	// on their own. Closing the group ends the last generation first.
	var running sync.WaitGroup
	defer running.Wait()
	// Closing the group leaves it, after this member's partitions have
	// committed what they fetched.
	defer func() { _ = group.Close() }()
	groupCtx, rejoin := context.WithCancelCause(ctx)
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		c.watchGroup(groupCtx, rejoin)
	}()
	defer func() {
		rejoin(nil)
		<-watched
	}()
	for {
		gen, err := group.Next(groupCtx)
		if err != nil {
			if cause := context.Cause(groupCtx); errors.Is(cause, errRejoin) {
				return cause
			}
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return fmt.Errorf("kafka: group %s: %w", c.cfg.GroupID, err)
		}
		running.Wait()
		c.setState(true, nil)
		assigned := c.setAssignment(gen.Assignments)
		start := func(fn func(context.Context)) {
			running.Add(1)
			gen.Start(func(ctx context.Context) {
				defer running.Done()
				fn(ctx)
			})
		}
		// kafka-go ends a generation once every function it started has
		// returned, so the next generation's assignment is set after this.
		start(func(ctx context.Context) {
			<-ctx.Done()
			c.setAssignment(nil)
		})
		oc := newOffsetCommitter(gen, c.log)
		start(oc.run)
		for topic, parts := range gen.Assignments {
			for _, pa := range parts {
				start(func(ctx context.Context) {
					// A generation that ended before its partitions
					// started reads none: another member may own them.
					if ctx.Err() == nil {
						c.consumePartition(ctx, oc, topic, pa)
					}
				})
			}
		}
		c.log.Info().Int32("generation", gen.ID).Int("partitions", assigned).Msg("joined consumer group")
		if assigned > c.cfg.MaxPartitions {
			c.log.Warn().Int("partitions", assigned).Int("max_partitions", c.cfg.MaxPartitions).
				Msg("assigned more partitions than kafka.maxPartitions: kafka.memoryBudget does not hold the rest; raise kafka.maxPartitions and kafka.memoryBudget, or run more replicas")
		}
		if c.joined != nil {
			c.joined(gen.ID, gen.Assignments)
		}
	}
}

// setAssignment records a generation's assignment (nil once it ends) and
// returns how many partitions it holds.
func (c *Consumer) setAssignment(a map[string][]kafkago.PartitionAssignment) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.assignment = a
	if a == nil {
		return 0
	}
	c.assigned = 0
	for _, parts := range a {
		c.assigned += len(parts)
	}
	c.metrics.assigned.Set(float64(c.assigned))
	return c.assigned
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

// ReasonClusterNotAllowed is the poison reason of a message of a topic in
// kafka.topicClusters that names a cluster the topic may not speak for.
const ReasonClusterNotAllowed = "cluster_not_allowed"

// clusterOf is the cluster of m, whose event named named (or nothing),
// and whether m's topic may speak for it.
func (c *Consumer) clusterOf(m *kafkago.Message, named string) (string, bool) {
	claimed := cmp.Or(header(m, c.cfg.ClusterHeader), named)
	allowed, bound := c.topicClusters[m.Topic]
	switch {
	case !bound:
		return cmp.Or(claimed, c.defaultCluster), true
	case claimed == "" && len(allowed) == 1:
		return allowed[0], true
	}
	claimed = cmp.Or(claimed, c.defaultCluster)
	return claimed, slices.Contains(allowed, claimed)
}

func (c Config) topicClusterMap() map[string][]string {
	if len(c.TopicClusters) == 0 {
		return nil
	}
	m := map[string][]string{}
	for _, tc := range c.TopicClusters {
		m[tc.Topic] = append(m[tc.Topic], tc.Clusters...)
	}
	return m
}

func (c Config) validateTopicClusters(bad func(key, format string, args ...any)) {
	seen := map[string]bool{}
	for i, tc := range c.TopicClusters {
		key := fmt.Sprintf("topicClusters[%d]", i)
		switch {
		case !slices.Contains(c.Topics, tc.Topic):
			bad(key+".topic", "%q is not one of kafka.topics", tc.Topic)
		case seen[tc.Topic]:
			bad(key+".topic", "%q is listed twice", tc.Topic)
		}
		seen[tc.Topic] = true
		if len(tc.Clusters) == 0 || slices.Contains(tc.Clusters, "") {
			bad(key+".clusters", "lists no cluster (or an empty one) for topic %q", tc.Topic)
		}
	}
}
