package manifest

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
)

// writeAtomic replaces real, a regular file that held before, with after:
// written to a temporary file in the same directory, with real's owner,
// group and mode (setuid, setgid and sticky bits too), synced, then
// renamed over it and the directory synced, so that a reader sees the
// old file or the new one, never a part, and a crash keeps one of them.
// A file changed since it was read is left alone, and so is one the
// running user may not write (a rename would replace it anyway) or whose
// owner cannot be kept.
func writeAtomic(real string, before, after []byte) error {
	info, err := os.Lstat(real)
	if err != nil {
		return err
	}
	if !info.Mode().IsRegular() {
		return errors.New("no longer a regular file")
	}
	if readOnly(real, info) {
		return fmt.Errorf("read-only (mode %s): not rewritten; make it writable and run the fix again, or move it by hand", info.Mode().Perm())
	}
	now, err := os.ReadFile(real)
	if err != nil {
		return err
	}
	if !bytes.Equal(now, before) {
		return errors.New("changed while it was being fixed; run the fix again")
	}
	dir := filepath.Dir(real)
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(real)+".sunset-*")
	if err != nil {
		return fmt.Errorf("writing: %w", err)
	}
	done := false
	defer func() {
		if !done {
			_ = tmp.Close()           // already failed; the error said why
			_ = os.Remove(tmp.Name()) // nothing else points at it
		}
	}()
	if _, err := tmp.Write(after); err != nil {
		return fmt.Errorf("writing: %w", err)
	}
	if st, ok := info.Sys().(*syscall.Stat_t); ok {
		tmpInfo, err := tmp.Stat()
		if err != nil {
			return fmt.Errorf("writing: %w", err)
		}
		mine, _ := tmpInfo.Sys().(*syscall.Stat_t)
		if os.Geteuid() == 0 || mine == nil || mine.Uid != st.Uid || mine.Gid != st.Gid {
			if err := tmp.Chown(int(st.Uid), int(st.Gid)); err != nil {
				return fmt.Errorf("its owner and group (%d:%d) cannot be kept (%w): not rewritten; run the fix as its owner, or move it by hand", st.Uid, st.Gid, err)
			}
		}
	}
	// After the chown, which clears setuid and setgid.
	if err := tmp.Chmod(info.Mode() & (fs.ModePerm | fs.ModeSetuid | fs.ModeSetgid | fs.ModeSticky)); err != nil {
		return fmt.Errorf("writing: %w", err)
	}
	if err := tmp.Sync(); err != nil {
		return fmt.Errorf("writing: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("writing: %w", err)
	}
	if err := os.Rename(tmp.Name(), real); err != nil {
		return fmt.Errorf("writing: %w", err)
	}
	done = true
	return syncDir(dir)
}

// syncDir makes a rename in dir last through a crash.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("rewritten, but syncing its directory: %w", err)
	}
	defer d.Close() //nolint:errcheck // read-only; Sync said whether it held
	if err := d.Sync(); err != nil {
		return fmt.Errorf("rewritten, but syncing its directory: %w", err)
	}
	return nil
}

// readOnly reports whether the running user may not write the file by
// its mode: the owner's bit for its owner, the group's for a member, the
// others' bit else; root, whom no mode stops, by any write bit at all.
func readOnly(path string, info fs.FileInfo) bool {
	perm := info.Mode().Perm()
	st, ok := info.Sys().(*syscall.Stat_t)
	switch {
	case !ok:
		return perm&0o222 == 0
	case os.Geteuid() == 0:
		return perm&0o222 == 0
	case int(st.Uid) == os.Geteuid():
		return perm&0o200 == 0
	}
	return syscall.Access(path, 2 /* W_OK */) != nil
}
