package cloudwatchtest

import (
	"errors"
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
// them non-decreasing times, as CloudWatch wants. An event moto rejects
// (too old, too far ahead) fails t. moto takes messages larger than
// CloudWatch would, so a test can feed oversized ones.
func (s *Server) Put(t testing.TB, group, stream string, events []Event) {
	t.Helper()
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

// Lines turns messages into events one millisecond apart from start.
func Lines(start time.Time, messages ...string) []Event {
	out := make([]Event, len(messages))
	for i, m := range messages {
		out[i] = Event{Time: start.Add(time.Duration(i) * time.Millisecond), Message: m}
	}
	return out
}
