package ociimage

import (
	"archive/tar"
	"bytes"
	"debug/elf"
	"encoding/binary"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// Created is the image's only clock: it stamps the config and every file,
// and nothing else (the build's own time) reaches the digest.
func TestImageTimestampIsCreated(t *testing.T) {
	dir := t.TempDir()
	opts := Options{
		Binary:         writeTestFile(t, dir, "sunset", staticELF(t, elf.EM_X86_64)),
		CACertificates: writeTestFile(t, dir, "ca.crt", []byte("-----BEGIN CERTIFICATE-----\n-----END CERTIFICATE-----\n")),
		Version:        "v1.0.0",
		Arch:           "amd64",
	}
	epoch, err := Build(opts)
	require.NoError(t, err)
	epochDigest, err := epoch.Digest()
	require.NoError(t, err)

	opts.Created = time.Date(2026, 5, 1, 12, 0, 0, 0, time.FixedZone("CEST", 2*3600))
	stamped, err := Build(opts)
	require.NoError(t, err)
	stampedDigest, err := stamped.Digest()
	require.NoError(t, err)
	require.NotEqual(t, epochDigest, stampedDigest)
	again, err := Build(opts)
	require.NoError(t, err)
	againDigest, err := again.Digest()
	require.NoError(t, err)
	require.Equal(t, stampedDigest, againDigest)

	cfg, err := stamped.ConfigFile()
	require.NoError(t, err)
	require.Equal(t, "2026-05-01T10:00:00Z", cfg.Created.UTC().Format(time.RFC3339))
	layers, err := stamped.Layers()
	require.NoError(t, err)
	rc, err := layers[0].Uncompressed()
	require.NoError(t, err)
	defer rc.Close()
	tr := tar.NewReader(rc)
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			break
		}
		require.NoError(t, err)
		require.True(t, hdr.ModTime.Equal(opts.Created), "%s: %s", hdr.Name, hdr.ModTime)
	}
}

func TestImageNameFromVersion(t *testing.T) {
	name, err := DefaultName("v0.3.0-4-gabcdef0-dirty")
	require.NoError(t, err)
	require.Equal(t, "localhost/sunset:v0.3.0-4-gabcdef0-dirty", name)
	_, err = DefaultName("")
	require.Error(t, err)
	_, err = DefaultName("1.0+meta")
	require.ErrorContains(t, err, `version "1.0+meta" cannot be an image tag`)
}

// staticELF is the smallest file debug/elf accepts as a statically linked
// executable for machine: a bare ELF64 header.
func staticELF(t *testing.T, machine elf.Machine) []byte {
	t.Helper()
	hdr := elf.Header64{
		Type:      uint16(elf.ET_EXEC),
		Machine:   uint16(machine),
		Version:   uint32(elf.EV_CURRENT),
		Ehsize:    64,
		Phentsize: 56,
		Shentsize: 64,
	}
	copy(hdr.Ident[:], elf.ELFMAG)
	hdr.Ident[elf.EI_CLASS] = byte(elf.ELFCLASS64)
	hdr.Ident[elf.EI_DATA] = byte(elf.ELFDATA2LSB)
	hdr.Ident[elf.EI_VERSION] = byte(elf.EV_CURRENT)
	var buf bytes.Buffer
	require.NoError(t, binary.Write(&buf, binary.LittleEndian, hdr))
	return buf.Bytes()
}

func writeTestFile(t *testing.T, dir, name string, content []byte) string {
	t.Helper()
	path := filepath.Join(dir, name)
	require.NoError(t, os.WriteFile(path, content, 0o644))
	return path
}
