package store

import (
	"time"

	"github.com/kube-sunset/sunset/countkey"
)

// The tests of the store were written against a commit of three lists
// (admission, API and field-rule requests) answered by three lists of
// duplicate flags and of skips. These adapters keep them as they were:
// they build one list of requests for Commit and sort its outcomes back.

// Request is an API request, as the tests write it.
type Request = countkey.Request

// FieldRuleRequest is a field rule's match, as the tests write it.
type FieldRuleRequest struct {
	ID, LegacyID   string
	Key            FieldRuleKey
	RemovedRelease string
	Seen           *countkey.Sighting
}

func (r FieldRuleRequest) request() countkey.Request {
	return countkey.Request{ID: r.ID, LegacyID: r.LegacyID, FieldRule: r.Key.Rule, RemovedRelease: r.RemovedRelease, Seen: r.Seen,
		Key: countkey.CountKey{Cluster: r.Key.Cluster, Cell: r.Key.Cell}}
}

// AdmissionRequest is a request's admission webhook counts, as the tests
// write it.
type AdmissionRequest struct {
	ID, LegacyID string
	Cluster      string
	Hour         time.Time
	Rows         []countkey.AdmissionRow
}

func (r AdmissionRequest) request() countkey.Request {
	return countkey.Request{ID: r.ID, LegacyID: r.LegacyID, Key: countkey.CountKey{Cluster: r.Cluster, Cell: countkey.Cell{Hour: r.Hour}},
		Admission: append([]countkey.AdmissionRow{}, r.Rows...)}
}

// Batch is what one commitBatch writes.
type Batch struct {
	Admission  []AdmissionRequest
	Requests   []Request
	FieldRules []FieldRuleRequest
	Cursors    []countkey.Cursor
}

// Duplicates says, request by request, which requests of a Batch had been
// counted before, and which were skipped (nil when none was).
type Duplicates struct {
	Admission, Requests, FieldRules []bool
	Skipped                         *Skipped
}

// Skipped says why requests of a Batch were left out, in the layout of
// Duplicates.
type Skipped struct {
	Admission, Requests, FieldRules []countkey.Skip
}

// commitBatch commits b through Commit.
func (s *Store) commitBatch(b Batch) (Duplicates, error) {
	reqs := make([]countkey.Request, 0, len(b.Admission)+len(b.Requests)+len(b.FieldRules))
	for _, r := range b.Admission {
		reqs = append(reqs, r.request())
	}
	reqs = append(reqs, b.Requests...)
	for _, r := range b.FieldRules {
		reqs = append(reqs, r.request())
	}
	out, err := s.Commit(reqs, b.Cursors...)
	if err != nil {
		return Duplicates{}, err
	}
	dup := func(o []countkey.Outcome) []bool {
		d := make([]bool, len(o))
		for i := range o {
			d[i] = o[i].Duplicate
		}
		return d
	}
	skips := func(o []countkey.Outcome) []countkey.Skip {
		var s []countkey.Skip
		for i := range o {
			if o[i].Skipped != "" {
				s = make([]countkey.Skip, len(o))
				break
			}
		}
		for i := range s {
			s[i] = o[i].Skipped
		}
		return s
	}
	adm, api, field := out[:len(b.Admission)], out[len(b.Admission):len(b.Admission)+len(b.Requests)], out[len(b.Admission)+len(b.Requests):]
	var d Duplicates
	if len(b.Admission) > 0 {
		d.Admission = dup(adm)
		if s := skips(adm); s != nil {
			d.Skipped = &Skipped{Admission: s}
		}
	}
	d.Requests, d.FieldRules = dup(api), dup(field)
	if s := skips(out[len(b.Admission):]); s != nil {
		if d.Skipped == nil {
			d.Skipped = &Skipped{}
		}
		d.Skipped.Requests, d.Skipped.FieldRules = s[:len(b.Requests)], s[len(b.Requests):]
	}
	return d, nil
}

// Apply commits API requests with cursors and reports for each whether it
// was a duplicate.
func (s *Store) Apply(reqs []Request, cursors ...countkey.Cursor) ([]bool, error) {
	d, err := s.commitBatch(Batch{Requests: reqs, Cursors: cursors})
	return d.Requests, err
}

// ApplyAdmission commits admission requests and reports for each whether
// it was a duplicate.
func (s *Store) ApplyAdmission(reqs []AdmissionRequest) ([]bool, error) {
	d, err := s.commitBatch(Batch{Admission: reqs})
	return d.Admission, err
}
