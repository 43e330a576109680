package gke

import (
	"context"
	"errors"
	"time"

	"cloud.google.com/go/pubsub/v2"

	"github.com/kube-sunset/sunset/classify"
	"github.com/kube-sunset/sunset/countkey"
	"github.com/kube-sunset/sunset/internal/backoff"
)

// item is one message made into an event, waiting for its commit.
type item struct {
	msg  *pubsub.Message
	ev   classify.Event
	node string
	// done is closed once the message is acknowledged or handed back.
	done chan struct{}
}

// maxBatch bounds the messages of one commit.
const maxBatch = 1000

// futureSlack is how far ahead of the clock an entry may be and still be
// told to Newest: the aggregator does not count entries further ahead.
const futureSlack = 24 * time.Hour

// Run receives until ctx ends and returns ctx's error. While the
// subscription cannot be received from (missing, no permission, Pub/Sub
// unreachable), it says why in Ready and tries again, pausing longer each
// time up to 30s. It closes the Pub/Sub client when it returns.
func (s *Source) Run(ctx context.Context) error {
	defer func() { _ = s.client.Close() }()
	retry := backoff.New(s.retryStart, maxRetry)
	for ctx.Err() == nil {
		started := time.Now()
		if ok, why := s.probe(ctx); !ok {
			s.setReady(false, why)
		} else {
			s.setReady(true, "")
			err := s.receive(ctx)
			if ctx.Err() != nil {
				break
			}
			if err == nil {
				err = errors.New("the stream ended")
			}
			s.setReady(false, explain(s.cfg.Subscription, err))
		}
		if time.Since(started) > maxRetry {
			// It worked for a while: this failure is a new one.
			retry.Reset()
		}
		if ctx.Err() == nil {
			s.log.Debug().Dur("retry_in", retry.Peek()).Msg("receiving again after a pause")
		}
		if !retry.Wait(ctx) {
			break
		}
	}
	s.setReady(false, whyStopped)
	return ctx.Err()
}

// receive runs one Receive, whose callbacks hand their messages to a
// commit loop and wait for the outcome, so that the client's flow control
// (MaxOutstanding) bounds the messages held uncommitted.
func (s *Source) receive(ctx context.Context) error {
	in := make(chan *item, maxBatch)
	loopDone := make(chan struct{})
	go func() {
		defer close(loopDone)
		s.commitLoop(ctx, in)
	}()
	err := s.sub.Receive(ctx, func(cctx context.Context, m *pubsub.Message) { s.handle(cctx, m, in) })
	// Receive returns once every callback has: nothing sends any more.
	close(in)
	<-loopDone
	return err
}

// handle decodes one message. One that cannot count is acknowledged at
// once; an event waits for its batch's commit.
func (s *Source) handle(ctx context.Context, m *pubsub.Message, in chan<- *item) {
	ev, node, aside, err := decodeFiltered(m.Data, s.prefilter)
	if err != nil {
		s.skip(m, err)
		return
	}
	s.metrics.messages.WithLabelValues(s.cfg.Cluster, resultOK).Inc()
	if aside.Result != "" {
		s.setAside(m, aside)
		return
	}
	it := &item{msg: m, ev: ev, node: node, done: make(chan struct{})}
	select {
	case in <- it:
	case <-ctx.Done():
		s.nack([]*item{it}, nackStopping)
		return
	}
	if s.handedOff != nil {
		s.handedOff()
	}
	<-it.done
}

// setAside acknowledges an entry the pre-filter set aside: it cannot
// count, so there is nothing to commit first. The aggregator is told, as
// it would have been had it judged the event.
func (s *Source) setAside(m *pubsub.Message, aside classify.SetAside) {
	var p classify.Prefiltered
	p.Add(aside)
	s.tallies.CountPrefiltered(SourceName, p)
	s.tallies.HeardReads(s.cfg.Cluster, aside.Read)
	m.Ack()
	s.metrics.acks.WithLabelValues(s.cfg.Cluster).Inc()
}

// skip acknowledges a message that cannot count and counts it by reason.
// Redelivering it would bring the same bytes back.
func (s *Source) skip(m *pubsub.Message, err error) {
	var e *entryError
	if !errors.As(err, &e) {
		e = &entryError{ReasonMalformedEntry, err.Error()}
	}
	s.metrics.messages.WithLabelValues(s.cfg.Cluster, string(e.Reason)).Inc()
	s.tallies.CountDecodeError(SourceName, string(e.Reason), 1)
	if e.Reason.unreadable() {
		s.tallies.CountInvalid(SourceName, 1)
		s.warn.Warn().Str("message_id", m.ID).Str("reason", string(e.Reason)).Str("error", e.Message).
			Msg("skipped a message that is not a readable LogEntry")
	} else {
		s.log.Debug().Str("message_id", m.ID).Str("reason", string(e.Reason)).Str("error", e.Message).
			Msg("skipped an entry that is not a Kubernetes audit log")
	}
	m.Ack()
	s.metrics.acks.WithLabelValues(s.cfg.Cluster).Inc()
}

// commitLoop commits the messages handed to it a batch at a time: the
// first waiting, and every one that arrived meanwhile, up to maxBatch. A
// batch is as large as the messages that queued during the commit before
// it, so that one message alone goes at once and a flood shares fsyncs.
func (s *Source) commitLoop(ctx context.Context, in <-chan *item) {
	retry := backoff.New(s.retryStart, maxRetry)
	batch := make([]*item, 0, maxBatch)
	for first := range in {
		batch = append(batch[:0], first)
	fill:
		for len(batch) < maxBatch {
			select {
			case it, ok := <-in:
				if !ok {
					break fill
				}
				batch = append(batch, it)
			default:
				break fill
			}
		}
		if ctx.Err() != nil {
			s.nack(batch, nackStopping)
			continue
		}
		if err := s.commit(ctx, batch); err != nil {
			if ctx.Err() != nil {
				continue
			}
			if errors.Is(err, countkey.ErrNoSpace) {
				// Paused until there is room; look again at the first pace.
				retry.Reset()
				s.log.Warn().Err(err).Int("messages", len(batch)).Dur("retry_in", retry.Peek()).Msg("receiving paused: no room to commit; the messages will be redelivered")
			} else {
				s.log.Error().Err(err).Int("messages", len(batch)).Dur("retry_in", retry.Peek()).Msg("commit failed; the messages will be redelivered")
			}
			// The batch's messages come back meanwhile, and wait in
			// their callbacks, within MaxOutstanding.
			retry.Wait(ctx)
			continue
		}
		retry.Reset()
	}
}

// commit counts a batch, one IngestAt per node, and acknowledges each
// node's messages once its counts are committed, or hands them back.
func (s *Source) commit(ctx context.Context, batch []*item) error {
	start := time.Now()
	var failed error
	for _, group := range byNode(batch) {
		events := make([]classify.Event, len(group))
		for i, it := range group {
			events[i] = it.ev
		}
		origin := classify.Origin{Source: SourceName, Cluster: s.cfg.Cluster, Node: group[0].node}
		sum, err := s.ing.IngestAt(ctx, origin, events)
		if err != nil {
			reason := nackCommitFailed
			if ctx.Err() != nil {
				reason = nackStopping
			}
			s.nack(group, reason)
			if failed == nil {
				failed = err
			}
			continue
		}
		s.ack(group)
		s.noteNewest(events)
		s.log.Debug().Str("node", origin.Node).Int("messages", len(group)).Int("counted", sum.Counted).
			Int("duplicates", sum.Duplicates).Int("skipped", sum.Skipped).Msg("committed")
	}
	s.metrics.commitDuration.WithLabelValues(s.cfg.Cluster).Observe(time.Since(start).Seconds())
	return failed
}

// byNode splits a batch by node, in the order nodes first appear; almost
// always there is one.
func byNode(batch []*item) [][]*item {
	if len(batch) > 0 && all(batch, func(it *item) bool { return it.node == batch[0].node }) {
		return [][]*item{batch}
	}
	var groups [][]*item
	index := map[string]int{}
	for _, it := range batch {
		i, ok := index[it.node]
		if !ok {
			i = len(groups)
			index[it.node] = i
			groups = append(groups, nil)
		}
		groups[i] = append(groups[i], it)
	}
	return groups
}

func all(items []*item, f func(*item) bool) bool {
	for _, it := range items {
		if !f(it) {
			return false
		}
	}
	return true
}

func (s *Source) ack(items []*item) {
	for _, it := range items {
		it.msg.Ack()
		close(it.done)
	}
	s.metrics.acks.WithLabelValues(s.cfg.Cluster).Add(float64(len(items)))
}

func (s *Source) nack(items []*item, reason string) {
	for _, it := range items {
		it.msg.Nack()
		close(it.done)
	}
	s.metrics.nacks.WithLabelValues(s.cfg.Cluster, reason).Add(float64(len(items)))
}

// noteNewest tells Newest the newest entry time committed so far.
func (s *Source) noteNewest(events []classify.Event) {
	if s.newest == nil {
		return
	}
	limit := time.Now().Add(futureSlack)
	var newest time.Time
	for i := range events {
		t := events[i].RequestReceived
		if t.After(newest) && t.Before(limit) {
			newest = t
		}
	}
	s.mu.Lock()
	if !newest.After(s.reported) {
		s.mu.Unlock()
		return
	}
	s.reported = newest
	s.mu.Unlock()
	s.newest(s.cfg.Cluster, newest)
}
