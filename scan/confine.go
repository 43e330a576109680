package scan

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// A scan reads what a stranger's pull request holds, so what it reads from
// disk is confined: a symlink is followed only when its target stays inside
// the scanned root (the directory given, the chart, the directory of a file
// given), and only regular files are opened. A named pipe would block the
// scan for ever, a device would read without end, and a symlink out of the
// tree would put a file of the machine running the scan (a kubeconfig, a
// token) into its output.

// SkipError says why an input was skipped rather than read: it is not an
// error of the scan, only a note in its output.
type SkipError struct{ Reason string }

func (e *SkipError) Error() string { return e.Reason }

// IsSkip reports whether err says an input was skipped, and why.
func IsSkip(err error) (string, bool) {
	var s *SkipError
	if errors.As(err, &s) {
		return s.Reason, true
	}
	return "", false
}

// TooLargeError is an input over one of the scan's size bounds. It is
// reported as soon as the bound is reached: nothing is read or inflated
// past it.
type TooLargeError struct {
	What  string
	Limit int64
}

func (e *TooLargeError) Error() string {
	return fmt.Sprintf("too large: %s is larger than %s", e.What, size(e.Limit))
}

func size(n int64) string {
	if n >= 1<<20 && n%(1<<20) == 0 {
		return fmt.Sprintf("%d MiB", n>>20)
	}
	if n >= 1<<10 && n%(1<<10) == 0 {
		return fmt.Sprintf("%d KiB", n>>10)
	}
	return fmt.Sprintf("%d bytes", n)
}

// Root is a directory a scan reads under, as given and as it resolves.
type Root struct{ lexical, real string }

// NewRoot is the root dir; symlinks under it are followed only to files
// and directories inside it.
func NewRoot(dir string) (Root, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return Root{}, err
	}
	real, err := filepath.EvalSymlinks(abs)
	if err != nil {
		return Root{}, err
	}
	return Root{lexical: abs, real: real}, nil
}

// Dir is the root as given, made absolute.
func (r Root) Dir() string { return r.lexical }

// Contains reports whether the resolved path p is the root or under it.
func (r Root) Contains(p string) bool { return within(r.real, p) }

func within(dir, p string) bool {
	rel, err := filepath.Rel(dir, p)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator)) && !filepath.IsAbs(rel)
}

// Resolve follows the symlinks of path, which is under the root, and
// returns where it leads with what is there (not followed further). A
// symlink that leaves the root, or leads nowhere, is a SkipError.
func (r Root) Resolve(path string) (string, fs.FileInfo, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return "", nil, err
	}
	real, err := filepath.EvalSymlinks(abs)
	if errors.Is(err, fs.ErrNotExist) {
		if _, lerr := os.Lstat(abs); lerr == nil {
			return "", nil, &SkipError{Reason: "a symlink to nothing: skipped"}
		}
		return "", nil, err
	}
	if err != nil {
		return "", nil, err
	}
	if !r.Contains(real) {
		return "", nil, &SkipError{Reason: "a symlink out of the scanned directory: not followed"}
	}
	info, err := os.Lstat(real)
	if err != nil {
		return "", nil, err
	}
	return real, info, nil
}

// ReadFile reads path, under the root, whole: it must resolve inside the
// root, be a regular file, and hold at most max bytes. A FIFO, device or
// socket is a SkipError and is never opened for reading.
func (r Root) ReadFile(path string, max int64) ([]byte, error) {
	real, info, err := r.Resolve(path)
	if err != nil {
		return nil, err
	}
	if reason := irregular(info.Mode()); reason != "" {
		return nil, &SkipError{Reason: reason}
	}
	if info.Size() > max {
		return nil, &TooLargeError{What: "the file", Limit: max}
	}
	return readRegular(real, max)
}

// irregular says what a file that is not a regular one is, or "".
func irregular(m fs.FileMode) string {
	what := ""
	switch {
	case m.IsRegular():
		return ""
	case m.IsDir():
		what = "a directory"
	case m&fs.ModeNamedPipe != 0:
		what = "a named pipe (FIFO)"
	case m&fs.ModeSocket != 0:
		what = "a socket"
	case m&fs.ModeDevice != 0:
		what = "a device"
	case m&fs.ModeSymlink != 0:
		what = "a symlink"
	default:
		what = "not a regular file"
	}
	return what + ", not a regular file: skipped"
}

// readRegular opens real, which has no symlink left in it, without
// following a symlink swapped in since or blocking on a pipe swapped in
// since, checks again that it is a regular file, and reads at most max
// bytes of it.
func readRegular(real string, max int64) ([]byte, error) {
	f, err := os.OpenFile(real, os.O_RDONLY|syscall.O_NONBLOCK|syscall.O_NOFOLLOW, 0)
	if err != nil {
		return nil, err
	}
	defer func() { _ = f.Close() }() // read-only: nothing to flush
	info, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if reason := irregular(info.Mode()); reason != "" {
		return nil, &SkipError{Reason: reason}
	}
	if info.Size() > max {
		return nil, &TooLargeError{What: "the file", Limit: max}
	}
	// Sized as the file is, so that reading it holds it once.
	buf := bytes.NewBuffer(make([]byte, 0, info.Size()+bytes.MinRead))
	if _, err := buf.ReadFrom(io.LimitReader(f, max+1)); err != nil {
		return nil, err
	}
	if int64(buf.Len()) > max {
		return nil, &TooLargeError{What: "the file", Limit: max}
	}
	return buf.Bytes(), nil
}

// readAtMost reads r whole, or fails with a TooLargeError once it has read
// more than max bytes.
func readAtMost(r io.Reader, max int64, what string) ([]byte, error) {
	b, err := io.ReadAll(io.LimitReader(r, max+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > max {
		return nil, &TooLargeError{What: what, Limit: max}
	}
	return b, nil
}

// tooLarge reports whether err is one of the scan's size bounds.
func tooLarge(err error) bool {
	var t *TooLargeError
	return errors.As(err, &t) || errors.Is(err, errTooManyObjects)
}
