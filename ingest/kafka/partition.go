package kafka

import (
	"context"
	"errors"
	"time"

	"github.com/rs/zerolog"

	"github.com/kube-sunset/sunset/store"
	kafkago "github.com/segmentio/kafka-go"
)

// maxRetryBackoff caps the pause between attempts to commit one batch.
const maxRetryBackoff = 30 * time.Second

// ReadBatches reads r in batches of up to cfg.BatchSize messages, waiting up
// to cfg.BatchWait for one to fill, and hands each to commit, until ctx is
// done or fetching fails. commit gets a context that is not cancelled, so a
// batch that was fetched is committed even while the partition is being
// given up: the next reader starts after it.
//
// When commit fails nothing of the batch may be assumed committed, so the
// batch is read again from its first offset after a pause (cfg.RetryBackoff,
// doubling up to 30s), so that a full disk does not spin: the partition
// neither stalls nor skips.
func ReadBatches(ctx context.Context, r *kafkago.Reader, cfg Config, log zerolog.Logger, commit func(context.Context, []kafkago.Message) error) {
	backoff := cfg.RetryBackoff
	for {
		batch, err := fetchBatch(ctx, r, cfg.BatchSize, cfg.BatchWait)
		if len(batch) > 0 {
			if cerr := commit(context.WithoutCancel(ctx), batch); cerr != nil {
				// Nothing of the batch may be assumed committed: read it
				// again from the last committed offset, after a pause, so
				// a full disk does not spin. The partition never stalls.
				if errors.Is(cerr, store.ErrNoSpace) {
					// Paused until there is room; look again at the first pace.
					backoff = cfg.RetryBackoff
					log.Warn().Err(cerr).Dur("retry_in", backoff).Msg("consumption paused: no room to commit")
				} else {
					log.Error().Err(cerr).Dur("retry_in", backoff).Msg("committing a batch failed; reading it again")
				}
				select {
				case <-ctx.Done():
					return
				case <-time.After(backoff):
				}
				backoff = min(2*backoff, maxRetryBackoff)
				if err := r.SetOffset(batch[0].Offset); err != nil {
					log.Error().Err(err).Msg("seeking back")
					return
				}
				continue
			}
			backoff = cfg.RetryBackoff
		}
		if err != nil {
			if ctx.Err() == nil {
				log.Warn().Err(err).Msg("fetching")
			}
			return
		}
	}
}

// fetchBatch waits for one message, then takes what else arrives within
// wait, up to size.
func fetchBatch(ctx context.Context, r *kafkago.Reader, size int, wait time.Duration) ([]kafkago.Message, error) {
	first, err := r.FetchMessage(ctx)
	if err != nil {
		return nil, err
	}
	batch := []kafkago.Message{first}
	waitCtx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	for len(batch) < size {
		m, err := r.FetchMessage(waitCtx)
		if err != nil {
			if ctx.Err() != nil {
				return batch, ctx.Err()
			}
			break
		}
		batch = append(batch, m)
	}
	return batch, nil
}

// NewPartitionReader reads one partition, outside any group, with cfg's
// fetch settings; call SetOffset before reading.
func NewPartitionReader(cfg Config, d *kafkago.Dialer, topic string, partition int, log zerolog.Logger) *kafkago.Reader {
	return kafkago.NewReader(kafkago.ReaderConfig{
		Brokers: cfg.Brokers, Topic: topic, Partition: partition, Dialer: d,
		MinBytes: cfg.MinBytes, MaxBytes: cfg.MaxBytes, MaxWait: cfg.MaxWait,
		ErrorLogger: kafkago.LoggerFunc(func(f string, a ...any) { log.Warn().Msgf(f, a...) }),
	})
}
