// Package backoff paces retries: a pause that doubles after each failure,
// from a start up to a max, and starts again from the start after a
// success.
package backoff

import (
	"context"
	"time"
)

// Backoff is the pause before the next attempt. The zero value pauses 0;
// use New.
type Backoff struct {
	start, max, next time.Duration
}

// New returns a Backoff whose first pause is start, doubling up to max.
func New(start, max time.Duration) *Backoff {
	return &Backoff{start: start, max: max, next: start}
}

// Peek returns the pause that Next or Wait will take, for a log line that
// says when the next attempt comes.
func (b *Backoff) Peek() time.Duration { return b.next }

// Next returns the pause to take now and doubles the one after, up to max.
func (b *Backoff) Next() time.Duration {
	d := b.next
	b.next = min(2*b.next, b.max)
	return d
}

// Reset makes the next pause the start again, after a success.
func (b *Backoff) Reset() { b.next = b.start }

// Wait pauses for Next. It returns false, at once, when ctx is done first.
func (b *Backoff) Wait(ctx context.Context) bool {
	t := time.NewTimer(b.Next())
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
