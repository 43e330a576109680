package fleet

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/rs/zerolog"
	kafkago "github.com/segmentio/kafka-go"

	"github.com/kube-sunset/sunset/countkey"
	"github.com/kube-sunset/sunset/internal/logbridge"
)

// lingerTime is how long the producer waits for more records to share a
// produce request. Callers wait for the acknowledgement, so it adds to each
// batch's latency; partitions filtered in parallel hide it.
const lingerTime = 2 * time.Millisecond

// publisher produces request records to the fleet's topic and returns once
// every broker in sync has them.
type publisher struct {
	w       *kafkago.Writer
	topic   string
	metrics *metrics
	// keys sign each record; nil sends them unsigned.
	keys *keyring
	log  zerolog.Logger
}

func newPublisher(cfg settings, d *kafkago.Dialer, log zerolog.Logger, m *metrics, keys *keyring) *publisher {
	return &publisher{topic: cfg.Fleet.Topic, metrics: m, keys: keys, log: log, w: &kafkago.Writer{
		Addr:  kafkago.TCP(cfg.Brokers...),
		Topic: cfg.Fleet.Topic,
		// By key: every copy of a request goes to one partition.
		Balancer:     &kafkago.Hash{},
		RequiredAcks: kafkago.RequireAll,
		Compression:  cfg.Fleet.Codec(),
		BatchSize:    cfg.BatchSize,
		BatchTimeout: lingerTime,
		// Few attempts here: a failed produce is retried by the caller, from
		// the same batch or outbox entry, with its own backoff.
		MaxAttempts: 3,
		Transport:   &kafkago.Transport{ClientID: d.ClientID, TLS: d.TLS, SASL: d.SASLMechanism, DialTimeout: d.Timeout},
		// kafka-go's own info is a line per batch written: trace.
		Logger:      kafkago.LoggerFunc(logbridge.Printf(log, logbridge.KafkaGo, zerolog.TraceLevel)),
		ErrorLogger: kafkago.LoggerFunc(logbridge.Printf(log, logbridge.KafkaGo, zerolog.WarnLevel)),
	}}
}

// publish produces one record per request. A nil error means all of them
// are acknowledged; otherwise any may have been written, and the caller
// sends them all again (counting replicas drop the copies). With keys, a
// request of a cluster this replica holds no key of is not sent (counting
// replicas would refuse it): it is counted in
// sunset_fleet_records_unsigned_total and logged.
func (p *publisher) publish(ctx context.Context, role string, reqs []countkey.Request) error {
	if len(reqs) == 0 {
		return nil
	}
	msgs := make([]kafkago.Message, 0, len(reqs))
	for _, r := range reqs {
		m, err := message(r)
		if err != nil {
			return err
		}
		if p.keys != nil && !p.keys.sign(&m, r.Key.Cluster) {
			p.metrics.unsigned.WithLabelValues(role).Inc()
			p.log.Warn().Str("cluster", r.Key.Cluster).Msg("not sending a request of a cluster this replica holds no kafka.fleet key of")
			continue
		}
		msgs = append(msgs, m)
	}
	if len(msgs) == 0 {
		return nil
	}
	if err := p.w.WriteMessages(ctx, msgs...); err != nil {
		p.metrics.produceErrors.WithLabelValues(role).Inc()
		if errors.Is(err, kafkago.UnknownTopicOrPartition) {
			return fmt.Errorf("fleet: topic %s does not exist; create it, or set kafka.fleet.topic to one that does: %w", p.topic, err)
		}
		return fmt.Errorf("fleet: producing %d records to topic %s: %w", len(msgs), p.topic, err)
	}
	p.metrics.produced.WithLabelValues(role).Add(float64(len(msgs)))
	return nil
}

func (p *publisher) close() error { return p.w.Close() }
