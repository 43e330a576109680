package eks

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/cloudwatchlogs"
	"github.com/aws/aws-sdk-go-v2/service/cloudwatchlogs/types"

	"github.com/kube-sunset/sunset/aggregate"
	"github.com/kube-sunset/sunset/ingest/auditjson"
)

// load reads the checkpoint back, or starts StartFrom before now.
func (s *Source) load() (*checkpoint, error) {
	raw, ok, err := s.o.Cursors.Cursor(s.cursorName())
	if err != nil {
		return nil, fmt.Errorf("eks %s: reading the checkpoint: %w", s.cfg.Cluster, err)
	}
	fresh := freshCheckpoint(s.now().Add(-s.cfg.StartFrom).UnixMilli())
	if !ok {
		ev := s.log.Info()
		if s.started {
			// Said once; a poll after a failure reads it again.
			ev = s.log.Debug()
		}
		s.started = true
		ev.Time("from", time.UnixMilli(fresh.from(s.cfg.Overlap.Milliseconds()))).Msg("no checkpoint; reading from startFrom before now")
		return fresh, nil
	}
	c, err := decodeCheckpoint(raw)
	if err != nil {
		// Not a reason to stop counting: the requests read again are
		// marked in the store already and count once.
		s.log.Error().Err(err).Str("cursor", s.cursorName()).Msg("the checkpoint cannot be read; reading again from startFrom before now")
		return fresh, nil
	}
	return c, nil
}

// poll reads the log group from the overlap before the watermark to its
// end, committing page by page.
func (s *Source) poll(ctx context.Context) error {
	if s.state == nil {
		c, err := s.load()
		if err != nil {
			return err
		}
		s.state = c
	}
	in := &cloudwatchlogs.FilterLogEventsInput{
		LogGroupName:        aws.String(s.cfg.LogGroup),
		LogStreamNamePrefix: aws.String(s.cfg.StreamPrefix),
		StartTime:           aws.Int64(s.state.from(s.cfg.Overlap.Milliseconds())),
	}
	in.Limit = aws.Int32(int32(s.cfg.PageSize))
	if s.knobs.pageLimit > 0 {
		in.Limit = aws.Int32(s.knobs.pageLimit)
	}
	// The paginator follows nextToken through empty pages too, which
	// CloudWatch returns while it searches.
	pages := cloudwatchlogs.NewFilterLogEventsPaginator(s.client, in)
	for pages.HasMorePages() {
		call, cancel := context.WithTimeout(ctx, callTimeout)
		out, err := pages.NextPage(call)
		cancel()
		if err != nil {
			return err
		}
		if err := s.page(ctx, out.Events); err != nil {
			return err
		}
	}
	return nil
}

// callTimeout bounds one page's call, the SDK's attempts and pauses
// included: the SDK's HTTP client would wait for a silent connection
// forever.
const callTimeout = 2 * time.Minute

// pageSummary is what became of a page's log events.
type pageSummary struct {
	New, Duplicates, Truncated int
	Unreadable                 map[auditjson.Reason]int
	// Newest is the newest new event's time, in Unix milliseconds.
	Newest int64
}

// batch is the events of one stream, one apiserver, in a page.
type batch struct {
	origin aggregate.Origin
	events []aggregate.Event
}

// page decodes and commits one page, with the checkpoint after it.
func (s *Source) page(ctx context.Context, events []types.FilteredLogEvent) error {
	var (
		sum      pageSummary
		batches  []batch
		byStream = map[string]int{}
		first    string // the first unreadable event, to find it by
		st       = s.state
		now      = s.now().UnixMilli()
	)
	for i := range events {
		e := &events[i]
		stream := aws.ToString(e.LogStreamName)
		// CloudWatch filters by the prefix; moto does not.
		if !strings.HasPrefix(stream, s.cfg.StreamPrefix) {
			continue
		}
		key, ts := eventKey(stream, aws.ToString(e.EventId)), aws.ToInt64(e.Timestamp)
		if _, ok := st.seen[key]; ok {
			sum.Duplicates++
			continue
		}
		st.seen[key] = ts
		st.watermark = max(st.watermark, min(ts, now))
		sum.Newest = max(sum.Newest, ts)
		ev, truncated, bad := decodeMessage(aws.ToString(e.Message), ts)
		if truncated {
			sum.Truncated++
		}
		if bad != nil {
			if sum.Unreadable == nil {
				sum.Unreadable, first = map[auditjson.Reason]int{}, stream+"/"+aws.ToString(e.EventId)
			}
			sum.Unreadable[bad.Reason]++
			continue
		}
		sum.New++
		b, ok := byStream[stream]
		if !ok {
			b = len(batches)
			byStream[stream] = b
			// EKS names no apiserver; its stream, one per apiserver
			// instance, stands for it. The aggregator bounds its
			// length and the store the apiservers per cluster.
			batches = append(batches, batch{origin: aggregate.Origin{Source: SourceName, Cluster: s.cfg.Cluster, Node: stream}})
		}
		batches[b].events = append(batches[b].events, ev)
	}
	if sum.New == 0 && sum.Unreadable == nil {
		// Nothing new: the checkpoint stands as committed.
		s.counted(sum)
		return nil
	}
	st.prune(s.cfg.Overlap.Milliseconds(), s.knobs.maxSeen)
	if err := s.commit(ctx, batches, aggregate.Cursor{Name: s.cursorName(), Value: st.encode()}); err != nil {
		return err
	}
	s.counted(sum)
	// A test waits for this line rather than asking again and again.
	s.log.Debug().Int("events", sum.New).Int64("watermark", st.watermark).Msg("page committed")
	if sum.Unreadable != nil {
		invalid := 0
		for reason, n := range sum.Unreadable {
			s.o.Ingester.CountDecodeError(SourceName, string(reason), n)
			invalid += n
		}
		s.o.Ingester.CountInvalid(SourceName, invalid)
		// Reasons and where, never the message: it can hold secrets.
		s.log.Warn().Int("events", invalid).Str("first", first).Interface("reasons", sum.Unreadable).
			Msg("passed over log events that are not audit events")
	}
	s.metrics.watermark.Set(float64(st.watermark) / 1e3)
	// Only forward: pages come stream by stream from moto, and an older
	// event read late must not make the lag look smaller.
	if sum.Newest > s.newest {
		s.newest = sum.Newest
		if s.o.Newest != nil {
			s.o.Newest(s.cfg.Cluster, time.UnixMilli(sum.Newest))
		}
	}
	return nil
}

// commit hands each stream's events to the ingester, the checkpoint with
// the last, so that it commits with the counts. Should an earlier batch
// commit and a later fail, the poll reads the page again from the old
// checkpoint, and the requests committed already count once all the same:
// the store marks each counted request and skips a marked one.
func (s *Source) commit(ctx context.Context, batches []batch, cursor aggregate.Cursor) error {
	if len(batches) == 0 {
		batches = []batch{{origin: aggregate.Origin{Source: SourceName, Cluster: s.cfg.Cluster}}}
	}
	for i, b := range batches {
		var cursors []aggregate.Cursor
		if i == len(batches)-1 {
			cursors = []aggregate.Cursor{cursor}
		}
		if _, err := s.o.Ingester.IngestAt(ctx, b.origin, b.events, cursors...); err != nil {
			return fmt.Errorf("eks %s: committing %d events of %s: %w", s.cfg.Cluster, len(b.events), b.origin.Node, err)
		}
	}
	return nil
}

// counted updates the metrics once a page is committed (or had nothing
// to commit): a page read again after a failed commit is counted once.
func (s *Source) counted(sum pageSummary) {
	unreadable := 0
	for reason, n := range sum.Unreadable {
		s.metrics.unreadable.WithLabelValues(string(reason)).Add(float64(n))
		unreadable += n
	}
	s.metrics.events.WithLabelValues(eventNew).Add(float64(sum.New))
	s.metrics.events.WithLabelValues(eventDuplicate).Add(float64(sum.Duplicates))
	s.metrics.events.WithLabelValues(eventUnreadable).Add(float64(unreadable))
	s.metrics.truncated.Add(float64(sum.Truncated))
	if s.knobs.committed != nil {
		s.knobs.committed(sum)
	}
}
