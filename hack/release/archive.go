package main

import (
	"archive/tar"
	"compress/gzip"
	"fmt"
	"io"
	"io/fs"
	"os"
	"slices"
	"strings"
	"time"
)

// member is one file of an archive: Name inside it, read from Path.
type member struct {
	Name, Path string
}

// parseMember reads NAME=PATH, or PATH alone for a file archived under
// its base name.
func parseMember(arg string) member {
	if name, path, ok := strings.Cut(arg, "="); ok {
		return member{Name: name, Path: path}
	}
	return member{Name: arg[strings.LastIndex(arg, "/")+1:], Path: arg}
}

// writeArchive writes a tar.gz of members that depends only on their
// names, contents and executable bits, and on mtime: entries in name
// order, owned by 0:0 with no user or group names, every timestamp mtime,
// and a gzip header with neither a file name nor a time of its own. GNU
// tar and gzip need half a dozen flags for that, and BSD tar on a Mac
// takes other ones, so the release does it here.
func writeArchive(w io.Writer, members []member, mtime time.Time) error {
	members = slices.Clone(members)
	slices.SortFunc(members, func(a, b member) int { return strings.Compare(a.Name, b.Name) })
	zw, err := gzip.NewWriterLevel(w, gzip.BestCompression)
	if err != nil {
		return err
	}
	zw.ModTime = time.Time{} // no time in the gzip header: the tar entries carry mtime
	tw := tar.NewWriter(zw)
	for i, m := range members {
		if i > 0 && members[i-1].Name == m.Name {
			return fmt.Errorf("release: two files named %s in one archive", m.Name)
		}
		if err := addFile(tw, m, mtime); err != nil {
			return err
		}
	}
	if err := tw.Close(); err != nil {
		return err
	}
	return zw.Close()
}

func addFile(tw *tar.Writer, m member, mtime time.Time) error {
	data, err := os.ReadFile(m.Path)
	if err != nil {
		return fmt.Errorf("release: reading %s: %w", m.Path, err)
	}
	info, err := os.Stat(m.Path)
	if err != nil {
		return fmt.Errorf("release: reading %s: %w", m.Path, err)
	}
	// Only the executable bit survives: a umask or a checkout's modes
	// must not change the archive.
	var mode int64 = 0o644
	if info.Mode()&fs.ModePerm&0o111 != 0 {
		mode = 0o755
	}
	hdr := &tar.Header{
		Typeflag: tar.TypeReg,
		Name:     m.Name,
		Mode:     mode,
		Size:     int64(len(data)),
		ModTime:  mtime,
		Format:   tar.FormatUSTAR,
	}
	if err := tw.WriteHeader(hdr); err != nil {
		return fmt.Errorf("release: archiving %s: %w", m.Name, err)
	}
	_, err = tw.Write(data)
	return err
}
