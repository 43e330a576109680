package classify

import (
	"github.com/kube-sunset/sunset/countkey"
)

// Origin says where a set of events came from.
type Origin struct {
	// Source is the ingest path: "webhook", "kafka" or "file".
	Source  string
	Cluster string
	Node    string
}

// Summary tells what became of the events of one Ingest call.
type Summary struct {
	Counted    int `json:"counted"`
	Duplicates int `json:"duplicates"`
	// Skipped counts events that are not counted by design: other stages,
	// APIs that are not deprecated, expired hours.
	Skipped int `json:"skipped"`
	// SkippedBy breaks Skipped down by reason (a Result).
	SkippedBy map[string]int `json:"skippedBy,omitempty"`
	// FieldMatches counts requests newly counted by field rules; an event
	// can be skipped as an API request and still set a deprecated field.
	FieldMatches int `json:"fieldMatches,omitempty"`
	// Admission tells what the admission webhook counter made of the
	// events, independently of the deprecation counter above.
	Admission *AdmissionSummary `json:"admission,omitempty"`
}

// skip records one skipped event.
func (s *Summary) skip(r Result) {
	s.Skipped++
	if s.SkippedBy == nil {
		s.SkippedBy = map[string]int{}
	}
	s.SkippedBy[string(r)]++
}

// Tally records what became of one event.
func (s *Summary) Tally(r Result) {
	switch r {
	case ResultCounted:
		s.Counted++
	case ResultDuplicate:
		s.Duplicates++
	default:
		s.skip(r)
	}
}

// Committed adds what the store made of committed requests to s: API
// requests counted, duplicates and skipped, field rules' matches newly
// counted. Admission requests are the admission counter's (committed).
func (s *Summary) Committed(reqs []countkey.Request, out []countkey.Outcome) {
	for i, r := range reqs {
		o := out[i]
		switch sub := r.Subject(); {
		case sub == countkey.SubjectAdmission:
		case o.Skipped != "":
			if sub == countkey.SubjectAPI {
				s.skip(Result(o.Skipped))
			}
		case sub == countkey.SubjectFieldRule:
			if !o.Duplicate {
				s.FieldMatches++
			}
		case o.Duplicate:
			s.Duplicates++
		default:
			s.Counted++
		}
	}
}

// Add adds o's tallies to s.
func (s *Summary) Add(o Summary) {
	s.Counted += o.Counted
	s.Duplicates += o.Duplicates
	s.FieldMatches += o.FieldMatches
	s.Skipped += o.Skipped
	for r, n := range o.SkippedBy {
		if s.SkippedBy == nil {
			s.SkippedBy = map[string]int{}
		}
		s.SkippedBy[r] += n
	}
}

// AdmissionSummary tells what the admission webhook counter made of a
// batch: requests with webhook annotations newly counted, and duplicates.
type AdmissionSummary struct {
	Counted    int `json:"counted"`
	Duplicates int `json:"duplicates"`
}

// TallyAdmission records what the admission counter would do with one
// event (a Planned.Admission): counted, duplicate, or nothing.
func (s *Summary) TallyAdmission(r Result) {
	if r == "" {
		return
	}
	if s.Admission == nil {
		s.Admission = &AdmissionSummary{}
	}
	if r == ResultDuplicate {
		s.Admission.Duplicates++
	} else {
		s.Admission.Counted++
	}
}
