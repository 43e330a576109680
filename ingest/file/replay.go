package file

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/kube-sunset/sunset/classify"
	"github.com/kube-sunset/sunset/ingest/auditjson"
)

// DefaultBatchSize matches kube-apiserver's largest webhook batch.
const DefaultBatchSize = 400

// maxBatchBytes bounds the raw size of one batch, well under the webhook's
// default body limit.
const maxBatchBytes = 16 << 20

// maxReportedInvalid is how many invalid lines a summary names.
const maxReportedInvalid = 5

// ReasonLineTooLong is the reason given for a line over MaxLineBytes, beside
// auditjson's reasons for lines that are not audit events.
const ReasonLineTooLong auditjson.Reason = "line_too_long"

// DecodeLine decodes one line into an event, or says why it is not one, with
// a reason (a metric label value) and a message that never quotes the line.
// Replay and follow judge lines with it, so both skip the same lines for the
// same reasons.
func DecodeLine(l Line) (classify.Event, *auditjson.Error) {
	if l.TooLong {
		return classify.Event{}, &auditjson.Error{Reason: ReasonLineTooLong, Message: fmt.Sprintf("line is longer than %d bytes", MaxLineBytes)}
	}
	ev, err := auditjson.DecodeEvent(l.Bytes)
	if err != nil {
		var e *auditjson.Error
		if errors.As(err, &e) {
			return ev, e
		}
		return ev, &auditjson.Error{Reason: auditjson.ReasonMalformedEvent, Message: err.Error()}
	}
	return ev, nil
}

// Sink receives decoded events in batches; raw[i] holds the line of
// events[i]. It returns what became of them.
type Sink interface {
	Send(ctx context.Context, events []classify.Event, raw [][]byte) (classify.Summary, error)
}

// Progress is updated while a replay runs; read it from another goroutine.
type Progress struct {
	// TotalBytes is the size of all inputs, 0 if unknown (stdin).
	TotalBytes int64
	Bytes      atomic.Int64
	Events     atomic.Int64
}

// InvalidLine names a line that is not an audit event.
type InvalidLine struct {
	Input   string `json:"input"`
	Line    int    `json:"line"`
	Reason  string `json:"reason"`
	Message string `json:"message"`
}

// Summary is the outcome of a replay.
type Summary struct {
	Inputs     int              `json:"inputs"`
	Events     int64            `json:"events"`
	Counted    int64            `json:"counted"`
	Duplicates int64            `json:"duplicates"`
	Skipped    int64            `json:"skipped"`
	SkippedBy  map[string]int64 `json:"skippedBy,omitempty"`
	Invalid    int64            `json:"invalid"`
	// AdmissionCounted and AdmissionDuplicates are the admission webhook
	// counter's: requests with webhook annotations.
	AdmissionCounted    int64         `json:"admissionCounted,omitempty"`
	AdmissionDuplicates int64         `json:"admissionDuplicates,omitempty"`
	Examples            []InvalidLine `json:"firstInvalid,omitempty"`
	Elapsed             time.Duration `json:"-"`
}

func (s *Summary) skipN(reason string, n int64) {
	s.Skipped += n
	if s.SkippedBy == nil {
		s.SkippedBy = map[string]int64{}
	}
	s.SkippedBy[reason] += n
}
