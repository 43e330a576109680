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
)

// maxPoisonSamples bounds the kept samples of poison messages.
const maxPoisonSamples = 100

// Options configures New.
type Options struct {
	Config         Config
	DefaultCluster string
	Ingester       Ingester
	Cursors        sink.CursorReader
	Logger         zerolog.Logger
	Registerer     prometheus.Registerer
	// Prefilter sets aside, undecoded, the events that cannot count; nil
	// decodes every event.
	Prefilter *auditjson.Prefilter
}

// Consumer is a member of the consumer group.
type Consumer struct {
	cfg            Config
	defaultCluster string
	ingester       Ingester
	cursors        sink.CursorReader
	log            zerolog.Logger
	metrics        *metrics
	age            *agegauge.Gauge
	decoder        *decoder
	dialer         *kafkago.Dialer
	// topicClusters are the clusters each bound topic may speak for.
	topicClusters map[string][]string

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
		decoder: newDecoder(cfg, o.Prefilter), dialer: d, lastErr: "not connected yet", topicClusters: cfg.topicClusterMap()}, nil
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
