package ociimage

import (
	"archive/tar"
	"bytes"
	"debug/elf"
	"errors"
	"fmt"
	"strings"
	"time"
)

// The accounts of a distroless image: root, and nonroot for the server.
// Go's os/user reads these without cgo; HOME and `id` agree with them.
const (
	passwd = "root:x:0:0:root:/root:/sbin/nologin\n" +
		"nonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n"
	group = "root:x:0:\n" +
		"nonroot:x:65532:\n"
	// nsswitch makes Go's resolver read /etc/hosts before DNS, as glibc
	// does with Debian's file; without it Go would ask DNS first.
	nsswitch = "hosts: files dns\n"
)

// rootFilesystem is the image's only layer, as an uncompressed tar. Entries
// come in a fixed order, parents first, with fixed times and owners, so the
// bytes depend on the binary and the CA bundle alone.
func rootFilesystem(binary, caBundle []byte, mtime time.Time) ([]byte, error) {
	type entry struct {
		name     string
		mode     int64
		uid, gid int
		content  []byte // nil for a directory
	}
	entries := []entry{
		{name: "etc/", mode: 0o755},
		{name: "etc/group", mode: 0o644, content: []byte(group)},
		{name: "etc/nsswitch.conf", mode: 0o644, content: []byte(nsswitch)},
		{name: "etc/passwd", mode: 0o644, content: []byte(passwd)},
		{name: "etc/ssl/", mode: 0o755},
		{name: "etc/ssl/certs/", mode: 0o755},
		{name: "etc/ssl/certs/ca-certificates.crt", mode: 0o644, content: caBundle},
		{name: "home/", mode: 0o755},
		{name: "home/nonroot/", mode: 0o700, uid: UID, gid: GID},
		{name: "root/", mode: 0o700},
		{name: "tmp/", mode: 0o1777},
		{name: "usr/", mode: 0o755},
		{name: "usr/local/", mode: 0o755},
		{name: "usr/local/bin/", mode: 0o755},
		{name: strings.TrimPrefix(BinaryPath, "/"), mode: 0o755, content: binary},
		{name: "var/", mode: 0o755},
		{name: "var/lib/", mode: 0o755},
		{name: strings.TrimPrefix(DataDir, "/") + "/", mode: 0o755, uid: UID, gid: GID},
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range entries {
		hdr := &tar.Header{
			Name:    e.name,
			Mode:    e.mode,
			Uid:     e.uid,
			Gid:     e.gid,
			ModTime: mtime,
			Format:  tar.FormatPAX,
		}
		if e.content == nil {
			hdr.Typeflag = tar.TypeDir
		} else {
			hdr.Typeflag = tar.TypeReg
			hdr.Size = int64(len(e.content))
		}
		if err := tw.WriteHeader(hdr); err != nil {
			return nil, fmt.Errorf("%s: %w", e.name, err)
		}
		if _, err := tw.Write(e.content); err != nil {
			return nil, fmt.Errorf("%s: %w", e.name, err)
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// elfMachine is the ELF machine of a GOARCH the image can be built for, to
// catch a binary built for another architecture.
func elfMachine(arch string) (elf.Machine, error) {
	switch arch {
	case "amd64":
		return elf.EM_X86_64, nil
	case "arm64":
		return elf.EM_AARCH64, nil
	case "ppc64le":
		return elf.EM_PPC64, nil
	case "riscv64":
		return elf.EM_RISCV, nil
	case "s390x":
		return elf.EM_S390, nil
	}
	return elf.EM_NONE, fmt.Errorf("architecture %q is not one of amd64, arm64, ppc64le, riscv64, s390x", arch)
}

// checkStaticLinux fails unless binary is a statically linked ELF executable
// for arch. The image has no libc and no loader: a dynamically linked binary
// would fail to start with a baffling "no such file or directory".
func checkStaticLinux(binary []byte, arch string) error {
	want, err := elfMachine(arch)
	if err != nil {
		return err
	}
	f, err := elf.NewFile(bytes.NewReader(binary))
	if err != nil {
		return fmt.Errorf("not a linux executable: %w", err)
	}
	defer func() { _ = f.Close() }()
	if f.Machine != want {
		return fmt.Errorf("built for %s, not %s (set GOARCH=%s when building)", f.Machine, arch, arch)
	}
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			return errors.New("dynamically linked; build it with CGO_ENABLED=0 (make build does)")
		}
	}
	return nil
}
