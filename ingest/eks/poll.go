package eks

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/cloudwatchlogs"
	"github.com/aws/aws-sdk-go-v2/service/cloudwatchlogs/types"

	"github.com/kube-sunset/sunset/classify"
	"github.com/kube-sunset/sunset/countkey"
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
		ev.Time("from", time.UnixMilli(max(fresh.start-s.cfg.Overlap.Milliseconds(), 0))).Msg("no checkpoint; reading from startFrom before now")
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

// poll lists the group's audit streams and reads each from its own
// position, committing page by page.
func (s *Source) poll(ctx context.Context) error {
	if s.state == nil {
		c, err := s.load()
		if err != nil {
			return err
		}
		s.state = c
	}
	streams, err := s.listStreams(ctx)
	if err != nil {
		return err
	}
	for _, ls := range streams {
		if err := s.readStream(ctx, ls); err != nil {
			return err
		}
	}
	return nil
}

// listedStream is an audit stream as DescribeLogStreams lists it.
type listedStream struct {
	name string
	// lastIngestion is when CloudWatch last took an event into the
	// stream, by its clock, in Unix milliseconds; 0 when it has none.
	lastIngestion int64
}

// listStreams lists the group's streams of the audit prefix, by name.
// It is how a stream is found however far behind the others it is: a
// read by time would not return a late stream's events.
func (s *Source) listStreams(ctx context.Context) ([]listedStream, error) {
	in := &cloudwatchlogs.DescribeLogStreamsInput{
		LogGroupName:        aws.String(s.cfg.LogGroup),
		LogStreamNamePrefix: aws.String(s.cfg.StreamPrefix),
	}
	var out []listedStream
	pages := cloudwatchlogs.NewDescribeLogStreamsPaginator(s.client, in)
	for pages.HasMorePages() {
		call, cancel := context.WithTimeout(ctx, callTimeout)
		page, err := pages.NextPage(call)
		cancel()
		if err != nil {
			return nil, err
		}
		for _, ls := range page.LogStreams {
			name := aws.ToString(ls.LogStreamName)
			// CloudWatch filters by the prefix already; a name over its
			// limit cannot be one of its streams.
			if !strings.HasPrefix(name, s.cfg.StreamPrefix) || len(name) > maxStreamName {
				continue
			}
			out = append(out, listedStream{name: name, lastIngestion: aws.ToInt64(ls.LastIngestionTime)})
		}
	}
	slices.SortFunc(out, func(a, b listedStream) int { return strings.Compare(a.name, b.name) })
	return out, nil
}

// readStream reads one stream, if it may hold what was not read yet.
//
// Between sweeps, a read starts at the stream's watermark: it takes what
// is new, at a page's cost when little is. Every sweepEvery (the overlap)
// a sweep reads from two overlaps before the watermark the previous
// sweep began at: the first overlap of it to find what arrived late, the
// rest for what still arrives in time. An event that arrives within an
// overlap behind its stream's newest is so counted at the latest a sweep
// later; each part of the log is read some four times in all, where
// re-reading the overlap at every poll read it overlap/pollInterval
// times (20 with the defaults).
//
// A stream whose lastIngestionTime is no newer than what was read has
// nothing new, and once a sweep has begun an overlap after it, nothing
// late either: it is not read again until it takes an event. Old
// apiservers' streams, kept as long as the group keeps logs, so cost no
// call.
func (s *Source) readStream(ctx context.Context, ls listedStream) error {
	ov := s.cfg.Overlap.Milliseconds()
	st := s.state.stream(ls.name, ov)
	now := s.now().UnixMilli()
	quiet := ls.lastIngestion <= st.ingested
	settled := st.sweptAt != 0 && st.sweptAt >= ls.lastIngestion+ov
	sweep := st.sweptAt == 0 || now-st.sweptAt >= s.knobs.sweepEvery.Milliseconds()
	switch {
	case quiet && settled:
		return nil
	case quiet && !sweep:
		return nil
	}
	from, lateBefore := st.watermark, int64(0)
	began := st.watermark
	if sweep {
		from, lateBefore = st.sweepFrom(ov), st.lateBefore(ov)
	}
	in := &cloudwatchlogs.FilterLogEventsInput{
		LogGroupName:   aws.String(s.cfg.LogGroup),
		LogStreamNames: []string{ls.name},
		StartTime:      aws.Int64(from),
		Limit:          aws.Int32(int32(s.cfg.PageSize)),
	}
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
		if err := s.page(ctx, ls.name, st, lateBefore, out.Events); err != nil {
			return err
		}
	}
	if sweep {
		// Committed with the next page's checkpoint; until then a restart
		// sweeps again, which costs reads and loses nothing.
		st.sweptFrom, st.sweptAt = began, now
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
	// Late is how many of New arrived over an overlap behind their
	// stream's newest.
	Late       int
	Unreadable map[auditjson.Reason]int
	// Aside is what the pre-filter set aside of New, undecoded.
	Aside classify.Prefiltered
	// Newest is the newest new event's time, in Unix milliseconds.
	Newest int64
}

// page decodes and commits one page of a stream, with the checkpoint
// after it. An event read for the first time before lateBefore arrived
// late: it is counted as late, and handed over as any other, to count
// if the store has not counted its request.
func (s *Source) page(ctx context.Context, stream string, st *streamState, lateBefore int64, events []types.FilteredLogEvent) error {
	var (
		sum    pageSummary
		batch  []classify.Event
		first  string // the first unreadable event, to find it by
		now    = s.now().UnixMilli()
		origin = classify.Origin{Source: SourceName, Cluster: s.cfg.Cluster, Node: stream}
	)
	for i := range events {
		e := &events[i]
		key, ts := eventKey(stream, aws.ToString(e.EventId)), aws.ToInt64(e.Timestamp)
		st.ingested = max(st.ingested, aws.ToInt64(e.IngestionTime))
		if s.state.known(st, key) {
			sum.Duplicates++
			continue
		}
		st.seen[key] = ts
		st.watermark = max(st.watermark, min(ts, now))
		sum.Newest = max(sum.Newest, ts)
		if ts < lateBefore && ts > st.forgot {
			sum.Late++
		}
		ev, truncated, bad := s.decode(aws.ToString(e.Message), ts, &sum.Aside)
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
		if ev != nil {
			batch = append(batch, *ev)
		}
	}
	if sum.New == 0 && sum.Unreadable == nil {
		// Nothing new: the checkpoint stands as committed.
		s.counted(sum)
		return nil
	}
	s.state.prune(s.cfg.Overlap.Milliseconds(), s.knobs.maxSeen)
	// EKS names no apiserver; its stream, one per apiserver instance,
	// stands for it. The aggregator bounds its length and the store the
	// apiservers per cluster.
	cursor := countkey.Cursor{Name: s.cursorName(), Value: s.state.encode()}
	if _, err := s.o.Ingester.IngestAt(ctx, origin, batch, cursor); err != nil {
		return fmt.Errorf("eks %s: committing %d events of %s: %w", s.cfg.Cluster, len(batch), stream, err)
	}
	s.counted(sum)
	if sum.Aside != (classify.Prefiltered{}) {
		s.tallies.CountPrefiltered(SourceName, sum.Aside)
		s.tallies.HeardReads(s.cfg.Cluster, sum.Aside.Reads > 0)
	}
	// A test waits for this line rather than asking again and again.
	s.log.Debug().Str("stream", stream).Int("events", sum.New).Int64("watermark", st.watermark).Msg("page committed")
	if sum.Late > 0 {
		s.log.Warn().Str("stream", stream).Int("events", sum.Late).Dur("overlap", s.cfg.Overlap).
			Msg("log events arrived over an overlap behind their stream's newest; counted if their requests were not, but raise eks.overlap")
	}
	if sum.Unreadable != nil {
		invalid := 0
		for reason, n := range sum.Unreadable {
			s.tallies.CountDecodeError(SourceName, string(reason), n)
			invalid += n
		}
		s.tallies.CountInvalid(SourceName, invalid)
		// Reasons and where, never the message: it can hold secrets.
		s.log.Warn().Int("events", invalid).Str("first", first).Interface("reasons", sum.Unreadable).
			Msg("passed over log events that are not audit events")
	}
	s.metrics.watermark.Set(float64(s.state.newest()) / 1e3)
	// Only forward: an older stream's events, read after a newer one's,
	// must not make the lag look smaller.
	if sum.Newest > s.newest {
		s.newest = sum.Newest
		if s.o.Newest != nil {
			s.o.Newest(s.cfg.Cluster, time.UnixMilli(sum.Newest))
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
	s.metrics.late.Add(float64(sum.Late))
	if s.knobs.committed != nil {
		s.knobs.committed(sum)
	}
}
