package fleet

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/rs/zerolog"
	kafkago "github.com/segmentio/kafka-go"

	"github.com/kube-sunset/sunset/countkey"
	"github.com/kube-sunset/sunset/ingest/kafka"
	"github.com/kube-sunset/sunset/ingest/sink"
	"github.com/kube-sunset/sunset/internal/backoff"
)

// partitionRefresh is how often the counter looks for partitions added to
// the fleet's topic.
const partitionRefresh = 30 * time.Second

// counter is the count role: it reads every partition of the fleet's topic,
// outside any consumer group, and applies each record to this replica's
// store. Each partition's next offset is committed in the same transaction
// as the counts it produced, and reading resumes from there, so a crash
// neither loses nor repeats a record; copies of one request (a filter that
// produced it twice, a re-sent webhook batch) meet the same dedupe mark.
type counter struct {
	cfg     settings
	dialer  *kafkago.Dialer
	agg     Aggregator
	cursors sink.CursorReader
	log     zerolog.Logger
	metrics *metrics
	// now is the clock records' hours are checked against.
	now func() time.Time
	// keys check each record's signature; nil counts unsigned records.
	keys *keyring

	mu      sync.Mutex
	lastErr string
	// partErr is the last reason a partition's reader could not start.
	partErr string
	// behind holds, for the partitions not yet counted up to where they
	// ended when their reader started, that end.
	behind  map[int]int64
	running map[int]bool
}

func (c *counter) cursorName(partition int) string {
	return "fleet:" + c.cfg.Fleet.Topic + ":" + strconv.Itoa(partition)
}

// ready reports whether every partition is counted up to where it ended
// when this replica started, and why not. The reason does not name the
// fleet: its caller does, as the component that is not ready.
func (c *counter) ready() (bool, string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case c.lastErr != "":
		return false, c.lastErr
	case c.partErr != "":
		return false, c.partErr
	case c.running == nil:
		return false, "not connected yet"
	case len(c.behind) > 0:
		return false, fmt.Sprintf("catching up on %d of %d partitions of %s", len(c.behind), len(c.running), c.cfg.Fleet.Topic)
	}
	return true, ""
}

// run starts a reader per partition and looks for new partitions until ctx
// is done. Lookup failures are shown by ready and retried with backoff.
func (c *counter) run(ctx context.Context) {
	var wg sync.WaitGroup
	defer wg.Wait()
	retry := backoff.New(time.Second, 30*time.Second)
	for {
		wait := partitionRefresh
		parts, err := c.partitions(ctx)
		if ctx.Err() != nil {
			return
		}
		c.mu.Lock()
		failedBefore := c.lastErr != ""
		c.lastErr = ""
		if err != nil {
			c.lastErr = err.Error()
		}
		if c.running == nil && err == nil {
			c.running, c.behind = map[int]bool{}, map[int]int64{}
		}
		for _, p := range parts {
			if !c.running[p] {
				// Behind until its reader knows where the partition ends.
				c.running[p], c.behind[p] = true, -1
				c.metrics.caughtUp.Set(0)
				wg.Add(1)
				go func() {
					defer wg.Done()
					c.consume(ctx, p)
				}()
			}
		}
		c.mu.Unlock()
		if err != nil {
			wait = retry.Next()
			c.log.Error().Err(err).Dur("retry_in", wait).Msg("looking up the fleet's topic; check kafka.fleet.topic and kafka.brokers")
		} else {
			retry.Reset()
			if failedBefore {
				c.log.Debug().Int("partitions", len(parts)).Msg("found the fleet's topic")
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
	}
}

// partitions lists the topic's partitions from the first broker that
// answers.
func (c *counter) partitions(ctx context.Context) ([]int, error) {
	var errs []error
	for _, b := range c.cfg.Brokers {
		parts, err := c.dialer.LookupPartitions(ctx, "tcp", b, c.cfg.Fleet.Topic)
		if len(parts) == 0 && (err == nil || errors.Is(err, kafkago.UnknownTopicOrPartition)) {
			return nil, fmt.Errorf("topic %s does not exist; create it (kafka-topics.sh --create --topic %[1]s --partitions 6)", c.cfg.Fleet.Topic)
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", b, err))
			continue
		}
		out := make([]int, len(parts))
		for i, p := range parts {
			out[i] = p.ID
		}
		return out, nil
	}
	return nil, fmt.Errorf("topic %s: %w", c.cfg.Fleet.Topic, errors.Join(errs...))
}

// bounds reads from the first broker that answers where the partition's
// records begin and end (the offset after the last).
func (c *counter) bounds(ctx context.Context, partition int) (first, end int64, err error) {
	var errs []error
	for _, b := range c.cfg.Brokers {
		conn, err := c.dialer.DialLeader(ctx, "tcp", b, c.cfg.Fleet.Topic, partition)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		first, end, err = conn.ReadOffsets()
		_ = conn.Close()
		if err == nil {
			return first, end, nil
		}
		errs = append(errs, err)
	}
	return 0, 0, errors.Join(errs...)
}

// startOffset is where this replica's counts of a partition end, or else
// the partition's first record (all of the topic that is kept).
func (c *counter) startOffset(ctx context.Context, partition int) (start, end int64, err error) {
	first, end, err := c.bounds(ctx, partition)
	if err != nil {
		return 0, 0, err
	}
	raw, ok, err := c.cursors.Cursor(c.cursorName(partition))
	if err != nil {
		return 0, 0, err
	}
	if ok && len(raw) == 8 {
		return int64(binary.BigEndian.Uint64(raw)), end, nil
	}
	return first, end, nil
}

// consume counts one partition until ctx is done, starting over after a
// pause whenever the reader cannot start.
func (c *counter) consume(ctx context.Context, partition int) {
	log := c.log.With().Str("topic", c.cfg.Fleet.Topic).Int("partition", partition).Logger()
	retry := backoff.New(time.Second, 30*time.Second)
	for {
		err := c.consumeFrom(ctx, partition, log)
		if ctx.Err() != nil {
			return
		}
		// Never from a guessed offset: that could count records twice
		// or skip them.
		c.mu.Lock()
		c.partErr = fmt.Sprintf("partition %d: %v", partition, err)
		c.mu.Unlock()
		// Readiness says so before the line does, so that whoever reads
		// the line finds it there.
		log.Error().Err(err).Dur("retry_in", retry.Peek()).Msg("finding where to count the partition from")
		if !retry.Wait(ctx) {
			return
		}
	}
}

// consumeFrom counts a partition from where this replica's counts of it
// end, until ctx is done or the reader cannot start.
func (c *counter) consumeFrom(ctx context.Context, partition int, log zerolog.Logger) error {
	start, end, err := c.startOffset(ctx, partition)
	if err != nil {
		return err
	}
	r := kafka.NewPartitionReader(c.cfg.Config, c.dialer, c.cfg.Fleet.Topic, partition, log)
	defer func() { _ = r.Close() }()
	if err := r.SetOffset(start); err != nil {
		return err
	}
	c.mu.Lock()
	c.partErr = ""
	if _, ok := c.behind[partition]; ok {
		c.behind[partition] = end
	}
	c.mu.Unlock()
	c.progress(partition, start)
	log.Debug().Int64("offset", start).Int64("end", end).Msg("counting partition")
	label := strconv.Itoa(partition)
	kafka.ReadBatches(ctx, r, c.cfg.Config, log, func(ctx context.Context, batch []kafkago.Message) error {
		reqs := make([]countkey.Request, 0, len(batch))
		for _, m := range batch {
			if skippedBatch(m) {
				// It stands for a record batch over
				// kafka.maxDecompressedBytes; committing it moves on.
				c.metrics.records.WithLabelValues(reasonTooLarge).Inc()
				log.Warn().Int64("offset", m.Offset).Int64("max_decompressed_bytes", int64(c.cfg.MaxDecompressedBytes)).
					Msg("skipping a record batch that decompresses past kafka.maxDecompressedBytes")
				continue
			}
			req, dropped, err := decodeCounted(m.Value, c.now())
			if err != nil {
				c.metrics.records.WithLabelValues(reason(err)).Inc()
				log.Warn().Err(err).Int64("offset", m.Offset).Msg("skipping a record")
				continue
			}
			if c.keys != nil {
				if why := c.keys.verify(m, req.Key.Cluster); why != "" {
					// Never reaches the store; committing the batch
					// moves past it.
					c.metrics.records.WithLabelValues(why).Inc()
					log.Warn().Str("reason", why).Int64("offset", m.Offset).Msg("refusing a record not signed by a key of the cluster it names")
					continue
				}
			}
			if dropped != "" {
				c.metrics.records.WithLabelValues(dropped).Inc()
			} else {
				c.metrics.records.WithLabelValues("ok").Inc()
			}
			reqs = append(reqs, req)
		}
		last := batch[len(batch)-1]
		next := last.Offset + 1
		cursor := countkey.Cursor{Name: c.cursorName(partition), Value: binary.BigEndian.AppendUint64(nil, uint64(next))}
		if _, err := c.agg.Apply(ctx, Source, reqs, cursor); err != nil {
			return err
		}
		c.metrics.lag.WithLabelValues(label).Set(float64(max(last.HighWaterMark-next, 0)))
		c.progress(partition, next)
		return nil
	})
	return errors.New("reader stopped")
}

// progress notes that a partition is counted up to next; it is caught up
// once next reaches the end it had when its reader started.
func (c *counter) progress(partition int, next int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	end, ok := c.behind[partition]
	if !ok || end < 0 || next < end {
		return
	}
	delete(c.behind, partition)
	if len(c.behind) == 0 {
		c.metrics.caughtUp.Set(1)
		c.log.Info().Int("partitions", len(c.running)).Msg("caught up with the fleet's topic")
	}
}

// skippedBatch reports whether m is what ReadBatches hands over in place of
// a record batch too large to read: no value, and the header that says so.
// A header set by a producer on a real record (with a value) is ignored.
func skippedBatch(m kafkago.Message) bool {
	if len(m.Value) != 0 {
		return false
	}
	for _, h := range m.Headers {
		if h.Key == kafka.SkippedHeader && string(h.Value) == kafka.ReasonTooLarge {
			return true
		}
	}
	return false
}
