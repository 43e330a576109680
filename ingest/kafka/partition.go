package kafka

import (
	"context"
	"errors"
	"slices"
	"time"

	"github.com/rs/zerolog"

	kafkago "github.com/segmentio/kafka-go"

	"github.com/kube-sunset/sunset/countkey"
	"github.com/kube-sunset/sunset/internal/backoff"
	"github.com/kube-sunset/sunset/internal/logbridge"
)

// maxRetryBackoff caps the pause between attempts to commit one batch.
const maxRetryBackoff = 30 * time.Second

// ReadBatches reads r in batches of up to cfg.BatchSize messages, waiting up
// to cfg.BatchWait for one to fill, and hands them to commit, until ctx is
// done or fetching fails. commit gets a context that is not cancelled, so a
// batch that was fetched is committed even while the partition is being
// given up: the next reader starts after it.
//
// Fetching goes on while a batch is committed: batches fetched meanwhile
// wait (up to 4 of them) and are then handed to commit together, in order,
// as one slice.
//
// When commit fails nothing of the batch may be assumed committed, so the
// batch is read again from its first offset after a pause (cfg.RetryBackoff,
// doubling up to 30s), so that a full disk does not spin: the partition
// neither stalls nor skips.
//
// A record batch that decompresses to more than kafka.maxDecompressedBytes
// cannot be read: it is handed to commit as one message of no value, at
// the batch's last offset, with the header SkippedHeader saying
// too_large, so that committing it moves the partition past it.
func ReadBatches(ctx context.Context, r *kafkago.Reader, cfg Config, log zerolog.Logger, commit func(context.Context, []kafkago.Message) error) {
	runPartition(ctx, r, cfg, log, stages[[]kafkago.Message]{
		depth: 4,
		prepare: func(batch []kafkago.Message) *[]kafkago.Message {
			b := slices.Clone(batch)
			return &b
		},
		merge:  func(into, next *[]kafkago.Message) { *into = append(*into, *next...) },
		commit: func(ctx context.Context, b *[]kafkago.Message) error { return commit(ctx, *b) },
		skip: func(first, next int64) *[]kafkago.Message {
			rc := r.Config()
			return &[]kafkago.Message{{Topic: rc.Topic, Partition: rc.Partition, Offset: next - 1,
				Headers: []kafkago.Header{{Key: SkippedHeader, Value: []byte(ReasonTooLarge)}}}}
		},
	})
}

// SkippedHeader marks the message ReadBatches hands over in place of a
// record batch it could not read; its value is the reason.
const SkippedHeader = "sunset-skipped"

// stages are what a partition does with the batches it fetches.
type stages[B any] struct {
	// prepare turns a batch into what is committed; it runs as batches are
	// fetched and must not keep the slice, which is reused.
	prepare func([]kafkago.Message) *B
	// merge appends the batch that follows into; commit then commits both.
	merge func(into, next *B)
	// commit commits, in fetch order, with a context that is not
	// cancelled; an error means nothing of it may be assumed committed.
	commit func(context.Context, *B) error
	// depth is how many prepared batches may wait for their commit before
	// fetching waits too.
	depth int
	// skip stands for the messages from first to next (excluded), a
	// record batch over kafka.maxDecompressedBytes that cannot be read:
	// committing it moves the partition past them.
	skip func(first, next int64) *B
}

// staged is a prepared batch on its way to its commit.
type staged[B any] struct {
	first int64 // the batch's first offset
	batch *B
	bytes int64 // its messages' bytes, held until it is committed
}

// maxMerged bounds how many waiting batches one commit takes.
const maxMerged = 64

// runPartition fetches and prepares batches in this goroutine while another
// commits them, so that fetching, decoding and committing overlap and a
// slow commit does not stall fetching until st.depth batches wait. Batches
// that wait for a commit in progress are merged into the next one.
//
// A failed commit stops the epoch: the batches behind it are dropped,
// fetching stops, and after a pause the partition is read again from the
// failed batch's first offset.
func runPartition[B any](ctx context.Context, r *kafkago.Reader, cfg Config, log zerolog.Logger, st stages[B]) {
	retry := backoff.New(cfg.RetryBackoff, maxRetryBackoff)
	buf := make([]kafkago.Message, 0, cfg.BatchSize)
	for {
		failure, committed, err := runEpoch(ctx, r, cfg, log, st, &buf)
		if committed {
			retry.Reset()
		}
		if failure == nil {
			if err != nil && ctx.Err() == nil {
				log.Warn().Err(err).Msg("fetching")
			}
			return
		}
		// Nothing of the failed batch may be assumed committed: read it
		// again from its first offset, after a pause, so a full disk does
		// not spin. The partition never stalls.
		if errors.Is(failure.err, countkey.ErrNoSpace) {
			// Paused until there is room; look again at the first pace.
			retry.Reset()
			log.Warn().Err(failure.err).Dur("retry_in", retry.Peek()).Msg("consumption paused: no room to commit")
		} else {
			log.Error().Err(failure.err).Dur("retry_in", retry.Peek()).Msg("committing a batch failed; reading it again")
		}
		if !retry.Wait(ctx) {
			return
		}
		if err := r.SetOffset(failure.first); err != nil {
			log.Error().Err(err).Msg("seeking back")
			return
		}
	}
}

// commitFailure is a failed commit and where to read again from.
type commitFailure struct {
	first int64
	err   error
}

// runEpoch fetches and commits until ctx is done, fetching fails (err) or
// a commit fails (failure). committed reports whether any commit went
// through. Once ctx is done, what was fetched is still committed before it
// returns.
func runEpoch[B any](ctx context.Context, r *kafkago.Reader, cfg Config, log zerolog.Logger, st stages[B], buf *[]kafkago.Message) (failure *commitFailure, committed bool, err error) {
	fetchCtx, stopFetching := context.WithCancel(ctx)
	defer stopFetching()
	queue := make(chan staged[B], st.depth)
	failed := make(chan struct{})
	done := make(chan struct{})
	// At most a batch's worth waits for its commit while the next is
	// fetched: kafka.memoryBudget.
	h := newHeld()
	go func() {
		defer close(done)
		failure, committed = commitQueue(context.WithoutCancel(ctx), queue, st, h)
		if failure != nil {
			close(failed)
			stopFetching()
		}
	}()
	stage := func(s staged[B]) {
		select {
		case <-failed:
		default:
			select {
			case queue <- s:
			case <-failed:
			}
		}
	}
	for {
		if !h.waitBelow(fetchCtx, int64(cfg.BatchBytes)) {
			err = fetchCtx.Err()
			break
		}
		batch, n, ferr := fetchBatch(fetchCtx, r, (*buf)[:0], cfg.BatchSize, int64(cfg.BatchBytes), cfg.BatchWait)
		*buf = batch[:0]
		if len(batch) > 0 {
			h.add(n)
			stage(staged[B]{first: batch[0].Offset, batch: st.prepare(batch), bytes: n})
		}
		if isTooLarge(ferr) && fetchCtx.Err() == nil {
			// The next record batch cannot be read: it is poison, and
			// the partition goes on after it.
			first := r.Offset()
			next, perr := batchEnd(fetchCtx, r, first)
			if perr != nil {
				// Its header could not be read: skip its first message,
				// and the next fetch finds whether more of it is left.
				next = first + 1
				log.Warn().Err(perr).Int64("offset", first).Msg("reading where a record batch too large to decompress ends; skipping one message of it")
			}
			log.Warn().Err(ferr).Int64("offset", first).Int64("next", next).Msg("skipping a record batch that decompresses to more than kafka.maxDecompressedBytes")
			stage(staged[B]{first: first, batch: st.skip(first, next)})
			if serr := r.SetOffset(next); serr != nil {
				err = serr
				break
			}
			continue
		}
		if ferr != nil {
			err = ferr
			break
		}
	}
	close(queue)
	<-done
	return failure, committed, err
}

// commitQueue commits the batches of queue in order, each with those that
// wait behind it, until queue is closed or a commit fails.
func commitQueue[B any](ctx context.Context, queue <-chan staged[B], st stages[B], h *held) (failure *commitFailure, committed bool) {
	for s := range queue {
		bytes := s.bytes
	merge:
		for n := 1; n < maxMerged; n++ {
			select {
			case next, ok := <-queue:
				if !ok {
					break merge
				}
				st.merge(s.batch, next.batch)
				bytes += next.bytes
			default:
				break merge
			}
		}
		if err := st.commit(ctx, s.batch); err != nil {
			return &commitFailure{first: s.first, err: err}, committed
		}
		committed = true
		h.release(bytes)
	}
	return nil, committed
}

// fetchBatch waits for one message, then takes what else arrives within
// wait, up to size messages or maxBytes bytes, appending to buf; n is the
// batch's bytes.
func fetchBatch(ctx context.Context, r *kafkago.Reader, buf []kafkago.Message, size int, maxBytes int64, wait time.Duration) (batch []kafkago.Message, n int64, err error) {
	first, err := r.FetchMessage(ctx)
	if err != nil {
		return buf, 0, err
	}
	batch = append(buf, first)
	n = messageBytes(&first)
	waitCtx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	for len(batch) < size && n < maxBytes {
		m, err := r.FetchMessage(waitCtx)
		if err != nil {
			if ctx.Err() != nil {
				return batch, n, ctx.Err()
			}
			if isTooLarge(err) {
				return batch, n, err
			}
			break
		}
		batch = append(batch, m)
		n += messageBytes(&m)
	}
	return batch, n, nil
}

// NewPartitionReader reads one partition, outside any group, with cfg's
// fetch settings and decompression bound (InstallBoundedCodecs); call
// SetOffset before reading.
func NewPartitionReader(cfg Config, d *kafkago.Dialer, topic string, partition int, log zerolog.Logger) *kafkago.Reader {
	InstallBoundedCodecs(int64(cfg.MaxDecompressedBytes))
	return kafkago.NewReader(kafkago.ReaderConfig{
		Brokers: cfg.Brokers, Topic: topic, Partition: partition, Dialer: d,
		MinBytes: cfg.MinBytes, MaxBytes: cfg.MaxBytes, MaxWait: cfg.MaxWait, QueueCapacity: cfg.QueueCapacity,
		// kafka-go's own info is a line per empty fetch: trace.
		Logger:      kafkago.LoggerFunc(logbridge.Printf(log, logbridge.KafkaGo, zerolog.TraceLevel)),
		ErrorLogger: kafkago.LoggerFunc(logbridge.Printf(log, logbridge.KafkaGo, zerolog.WarnLevel)),
	})
}
