package store

import (
	"errors"
	"fmt"
	"time"

	badger "github.com/dgraph-io/badger/v4"

	"github.com/kube-sunset/sunset/countkey"
)

// maxChunk bounds how many requests share one badger transaction, far below
// badger's transaction size limit for realistic key sizes.
const maxChunk = 4096

// Commit counts each request once against its subject (an API, a field
// rule, admission webhooks; countkey.Request.Subject) and returns what
// became of each, aligned with reqs: counted, a duplicate (its ID was
// counted before in its cluster, by an earlier commit or earlier in
// reqs), or skipped with the reason. Marks, counts and metadata of a
// request are committed in one transaction and fsynced before Commit
// returns, so a nil error means everything is durable. Admission counts
// commit first, then the other requests, with the cursors in the
// transaction of the last, so that a cursor is never ahead of either.
// Requests from an expired hour must be filtered out by the caller.
//
// A request with a part of its key over its bound, or what it would store
// over its bound (bounds.go), or whose records badger or the store
// refuses alone, is skipped: the others are counted. Below the disk
// reserve it writes nothing and returns an error that matches
// countkey.ErrNoSpace; a cursor that cannot be stored fails it with an
// error that matches countkey.ErrUnstorable. A non-nil error means
// nothing may be assumed committed. Commit is timed and counted in the
// store's metrics.
func (s *Store) Commit(reqs []countkey.Request, cursors ...countkey.Cursor) ([]countkey.Outcome, error) {
	start := time.Now()
	out, err := s.commit(reqs, cursors)
	s.metrics.commitDuration.Observe(time.Since(start).Seconds())
	if err != nil {
		s.metrics.commitErrors.Inc()
	}
	return out, err
}

func (s *Store) commit(reqs []countkey.Request, cursors []countkey.Cursor) ([]countkey.Outcome, error) {
	if s.readOnly {
		return nil, errors.New("store: opened read-only")
	}
	if err := checkCursors(cursors); err != nil {
		return nil, err
	}
	out := make([]countkey.Outcome, len(reqs))
	// Admission requests commit first, in their own transactions; then
	// the requests to APIs before the field rules' matches, each in the
	// order given, so that the writes go in the order they always have.
	var adm, entries, fields []entry
	for i, r := range reqs {
		e := entry{Request: r, out: &out[i]}
		switch r.Subject() {
		case countkey.SubjectAdmission:
			if part, length := admissionTooLong(r); part != "" {
				e.skip(countkey.SkipTooLong)
				s.logSkip("admission", part, length, countkey.SkipTooLong)
				continue
			}
			adm = append(adm, e)
			continue
		case countkey.SubjectFieldRule:
			// A field rule's records are an API's, with the rule's name
			// in place of the API's.
			e.sub, e.Key.API = fieldRuleSubject, r.FieldRule
		default:
			e.sub = apiSubject
		}
		part, length := tooLong(e.sub, e.Key)
		why := countkey.SkipTooLong
		if part == "" {
			part, length = valueTooLarge(e.Request)
			why = countkey.SkipTooLarge
		}
		if part != "" {
			e.skip(why)
			s.logSkip(e.sub.what(), part, length, why)
			continue
		}
		if e.sub == fieldRuleSubject {
			fields = append(fields, e)
			continue
		}
		entries = append(entries, e)
	}
	entries = append(entries, fields...)
	s.applyMu.Lock()
	defer s.applyMu.Unlock()
	if len(adm) > 0 {
		if err := s.applyAdmission(adm); err != nil {
			return nil, err
		}
	}
	if err := s.apply(entries, cursors); err != nil {
		return nil, err
	}
	return out, nil
}

// entry is one request to count against its subject, and where its
// outcome goes. For a field rule, Key.API holds the rule's name.
type entry struct {
	sub *subject
	countkey.Request
	out *countkey.Outcome
}

// skip sets e's outcome to skipped, for why.
func (e entry) skip(why countkey.Skip) { e.out.Skipped = why }

// refuse skips the entry whose records badger or the store refused alone
// with err, and logs it.
func (s *Store) refuse(e entry, what string, err error) {
	why := skipReason(err)
	e.skip(why)
	s.logRefused(what, why, err)
}

// apply commits entries in chunks and cursors with the last; the caller
// holds applyMu. An entry whose records badger or the store refuses
// alone (skipReason) is left out and its outcome says why.
func (s *Store) apply(entries []entry, cursors []countkey.Cursor) error {
	write := func(lo, hi int, cursors []countkey.Cursor) error {
		// Each chunk is its own transaction: check before each, so that
		// no badger write starts below the reserve.
		if err := s.guardSpace(); err != nil {
			return err
		}
		return s.spaceError(s.applyChunk(entries[lo:hi], cursors))
	}
	if len(entries) == 0 && len(cursors) > 0 {
		return cursorError(write(0, 0, cursors))
	}
	// The cursors go with the last chunk; once a chunk is split to find
	// the entry at fault, in a transaction of their own after the others,
	// so that they are never taken for part of an entry's records.
	split, written := false, false
	err := isolating(len(entries), maxChunk, func(lo, hi int) error {
		var last []countkey.Cursor
		if hi == len(entries) && !split {
			last = cursors
		}
		err := write(lo, hi, last)
		switch {
		case err == nil:
			written = written || last != nil
		case skipReason(err) != "":
			split = true
		}
		return err
	}, func(i int, err error) {
		s.refuse(entries[i], entries[i].sub.what(), err)
	})
	if err != nil || written || len(cursors) == 0 {
		return err
	}
	return cursorError(write(0, 0, cursors))
}

// checkCursors refuses cursors badger would refuse, before anything is
// written.
func checkCursors(cursors []countkey.Cursor) error {
	for _, c := range cursors {
		if k := len(encodeCursorKey(c.Name)); k > maxKeyBytes || len(c.Value) > maxValueBytes {
			return fmt.Errorf("store: cursor of %d bytes with a name of %d bytes: %w", len(c.Value), len(c.Name), recordTooLarge(k, len(c.Value)))
		}
	}
	return nil
}

// cursorError is err, from a transaction of cursors alone, matching
// ErrUnstorable when the cursors are too many for one transaction: no
// retry would commit them.
func cursorError(err error) error {
	if errors.Is(err, badger.ErrTxnTooBig) {
		return fmt.Errorf("store: the cursors are more than one transaction holds: %w: %w", countkey.ErrUnstorable, err)
	}
	return err
}

// isolating calls apply on consecutive ranges of n items, each in its own
// transaction of at most limit items, halved while badger finds the
// transaction too big. It also halves a chunk that fails with an error
// that one item can cause (skipReason: ErrTxnTooBig, ErrUnstorable), down
// to the item at fault, which it hands to refused and goes on without:
// one item never fails the others. An item alone that fails with such an
// error is at fault, since its transaction holds nothing else. Other
// errors end it.
func isolating(n, limit int, apply func(lo, hi int) error, refused func(i int, err error)) error {
	var run func(lo, hi int) error
	run = func(lo, hi int) error {
		size := limit
		for start := lo; start < hi; {
			size = min(size, hi-start)
			err := apply(start, start+size)
			switch {
			case err == nil:
			case skipReason(err) == "":
				return err
			case size == 1:
				refused(start, err)
			case errors.Is(err, badger.ErrTxnTooBig):
				// More than one transaction holds: smaller chunks
				// from here on.
				size /= 2
				continue
			default:
				// Each half in turn, the first before the second, so
				// that the order of the writes stays the order of the
				// items.
				half := size / 2
				if err := run(start, start+half); err != nil {
					return err
				}
				if err := run(start+half, start+size); err != nil {
					return err
				}
			}
			start += size
		}
		return nil
	}
	return run(0, n)
}
