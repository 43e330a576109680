package countkey

import "errors"

// ErrNoSpace is matched by the errors of commits the store refused for
// lack of disk space: nothing was committed, and retrying once there is
// room is safe. Inputs answer it with 503 or pause.
var ErrNoSpace = errors.New("store: not enough free disk space")

// ErrUnstorable is matched by the errors of writes refused because of
// what they would write, not because of the disk or the store: the same
// write fails again however often it is retried. The store skips a
// request it finds so (too_large, unstorable) and counts the others; it
// returns the error only for what it cannot skip, such as a cursor. The
// committer commits a failed group's jobs each alone, so the error is
// only ever the job's own.
var ErrUnstorable = errors.New("store: refused for what it would write")
