package cloudwatchtest

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/cloudwatchlogs"
	"github.com/aws/aws-sdk-go-v2/service/cloudwatchlogs/types"
)

// PutLogEvents' limits on one call: 10,000 events and 1,048,576 bytes,
// counting 26 bytes per event beside its message.
const (
	maxBatchEvents = 10000
	maxBatchBytes  = 1 << 20
	eventOverhead  = 26
)

// The window Put holds events' times to, around the real clock:
// PutLogEvents' own (no older than 14 days, no more than 2 hours ahead),
// less a day and an hour to spare. moto enforces PutLogEvents' window
// against the real clock, as CloudWatch does, so a test that gives events
// fixed times (a capture's) starts failing two weeks after they were
// written. Put refuses such times a day before moto would, saying why and
// what to do.
const (
	maxAge   = 13 * 24 * time.Hour
	maxAhead = time.Hour
)

// Event is one log event to put: its CloudWatch timestamp and message.
type Event struct {
	Time    time.Time
	Message string
}

// Stream names the EKS kube-apiserver audit stream of one apiserver
// instance, as EKS names them: kube-apiserver-audit-<hash>.
func Stream(hash string) string { return "kube-apiserver-audit-" + hash }

// CreateGroup creates a log group; one that exists already is fine.
func (s *Server) CreateGroup(t testing.TB, group string) {
	t.Helper()
	c, cancel := ctx(t)
	defer cancel()
	_, err := s.client.CreateLogGroup(c, &cloudwatchlogs.CreateLogGroupInput{LogGroupName: aws.String(group)})
	if err != nil && !errors.As(err, new(*types.ResourceAlreadyExistsException)) {
		t.Fatalf("cloudwatchtest: creating log group %s: %v", group, err)
	}
}

// CreateStream creates a log stream, and its group when there is none yet;
// one that exists already is fine.
func (s *Server) CreateStream(t testing.TB, group, stream string) {
	t.Helper()
	s.CreateGroup(t, group)
	c, cancel := ctx(t)
	defer cancel()
	_, err := s.client.CreateLogStream(c, &cloudwatchlogs.CreateLogStreamInput{LogGroupName: aws.String(group), LogStreamName: aws.String(stream)})
	if err != nil && !errors.As(err, new(*types.ResourceAlreadyExistsException)) {
		t.Fatalf("cloudwatchtest: creating log stream %s in %s: %v", stream, group, err)
	}
}

// Put writes events to a stream (created with its group when missing), in
// as many PutLogEvents calls as CloudWatch's limits need, in order: give
// them non-decreasing times, as CloudWatch wants, derived from time.Now()
// (an event's own times, in its message, may be anything). An event
// outside the window, more than 13 days before the real clock or more
// than an hour after it, fails t before anything is put, as does one moto
// rejects. moto takes messages larger than CloudWatch would, so a test can
// feed oversized ones.
func (s *Server) Put(t testing.TB, group, stream string, events []Event) {
	t.Helper()
	if err := checkWindow(time.Now(), events); err != nil {
		t.Fatalf("cloudwatchtest: putting to %s/%s: %v", group, stream, err)
	}
	s.CreateStream(t, group, stream)
	for len(events) > 0 {
		n, size := 0, 0
		for n < len(events) && n < maxBatchEvents {
			size += len(events[n].Message) + eventOverhead
			if n > 0 && size > maxBatchBytes {
				break
			}
			n++
		}
		s.put(t, group, stream, events[:n])
		events = events[n:]
	}
}

func (s *Server) put(t testing.TB, group, stream string, events []Event) {
	t.Helper()
	in := &cloudwatchlogs.PutLogEventsInput{LogGroupName: aws.String(group), LogStreamName: aws.String(stream)}
	for _, e := range events {
		in.LogEvents = append(in.LogEvents, types.InputLogEvent{Timestamp: aws.Int64(e.Time.UnixMilli()), Message: aws.String(e.Message)})
	}
	c, cancel := ctx(t)
	defer cancel()
	out, err := s.client.PutLogEvents(c, in)
	if err != nil {
		t.Fatalf("cloudwatchtest: putting %d events to %s/%s: %v", len(events), group, stream, err)
	}
	if r := out.RejectedLogEventsInfo; r != nil && (r.TooOldLogEventEndIndex != nil || r.TooNewLogEventStartIndex != nil || r.ExpiredLogEventEndIndex != nil) {
		t.Fatalf("cloudwatchtest: %s/%s rejected events (too old before index %d, too new from index %d, expired before index %d): give events times within 14 days before and 2 hours after now",
			group, stream, aws.ToInt32(r.TooOldLogEventEndIndex), aws.ToInt32(r.TooNewLogEventStartIndex), aws.ToInt32(r.ExpiredLogEventEndIndex))
	}
}

// checkWindow returns an error naming the first event whose time is
// outside the window around now.
func checkWindow(now time.Time, events []Event) error {
	for i, e := range events {
		age := now.Sub(e.Time)
		if age <= maxAge && -age <= maxAhead {
			continue
		}
		when := fmt.Sprintf("%s before", age.Round(time.Second))
		if age < 0 {
			when = fmt.Sprintf("%s after", (-age).Round(time.Second))
		}
		return fmt.Errorf("event %d of %d has the CloudWatch time %s, %s the real clock (%s): "+
			"moto, as CloudWatch, refuses PutLogEvents events older than 14 days or over 2 hours ahead, "+
			"and Put allows %d days back and %s ahead; derive the times put from time.Now(), not from a fixed date, "+
			"which would stop passing once it is two weeks old (an event's own times, in its message, may stay fixed)",
			i, len(events), e.Time.UTC().Format(time.RFC3339Nano), when, now.UTC().Format(time.RFC3339), maxAge/(24*time.Hour), maxAhead)
	}
	return nil
}

// Lines turns messages into events one millisecond apart from start.
func Lines(start time.Time, messages ...string) []Event {
	out := make([]Event, len(messages))
	for i, m := range messages {
		out[i] = Event{Time: start.Add(time.Duration(i) * time.Millisecond), Message: m}
	}
	return out
}
