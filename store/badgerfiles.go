package store

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"syscall"

	badger "github.com/dgraph-io/badger/v4"
	"github.com/dgraph-io/badger/v4/options"
	"github.com/dgraph-io/badger/v4/table"
	"github.com/dgraph-io/ristretto/v2/z"
	"github.com/rs/zerolog"
)

// logHeaderSize is the header of badger's log files (.mem and .vlog): a key
// ID and an IV, 20 bytes.
const logHeaderSize = 20

// Badger's record flags in log files.
const (
	bitTxn    byte = 1 << 6
	bitFinTxn byte = 1 << 7
)

// readManifest replays the MANIFEST read-only. torn describes a partial
// record at its end, if any.
func readManifest(dir string) (badger.Manifest, string, error) {
	f, err := os.Open(filepath.Join(dir, badger.ManifestFilename))
	if err != nil {
		return badger.Manifest{}, "", err
	}
	defer func() { _ = f.Close() }()
	fi, err := f.Stat()
	if err != nil {
		return badger.Manifest{}, "", err
	}
	mf, end, err := badger.ReplayManifestFile(f, 0, badger.DefaultOptions(dir).WithLogger(badgerLogger{zerolog.Nop()}))
	if err != nil {
		return badger.Manifest{}, "", err
	}
	torn := ""
	if end < fi.Size() {
		torn = fmt.Sprintf("valid up to byte %d of %d", end, fi.Size())
	}
	return mf, torn, nil
}

// checkTable opens a table as badger does, reading its index and its first
// and last blocks, and with deep every block. Badger panics on a table cut
// short, and on a block that fails its checksum; that is an answer here.
func checkTable(path string, compression options.CompressionType, deep bool) (int64, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return 0, err
	}
	mf, err := z.OpenMmapFile(path, os.O_RDONLY, 0)
	if err != nil {
		return fi.Size(), err
	}
	defer func() { _ = mf.Close(-1) }()
	opts := badgerOptions(filepath.Dir(path), zerolog.Nop())
	var t *table.Table
	err = recovered("its index or first block cannot be read: the file was cut short or overwritten", func() error {
		var err error
		t, err = table.OpenTable(mf, table.Options{
			ReadOnly: true, BlockSize: opts.BlockSize, BloomFalsePositive: opts.BloomFalsePositive,
			TableSize: uint64(opts.BaseTableSize), Compression: compression,
		})
		return err
	})
	if err != nil || !deep {
		return fi.Size(), err
	}
	const damaged = "a block fails its checksum: the file was overwritten"
	// Badger panics on some damaged blocks and returns an error on others.
	if recovered(damaged, t.VerifyChecksum) != nil {
		return fi.Size(), errors.New(damaged)
	}
	return fi.Size(), nil
}

// recovered runs fn and turns a panic into an error saying msg.
func recovered(msg string, fn func() error) (err error) {
	defer func() {
		if recover() != nil {
			err = errors.New(msg)
		}
	}()
	return fn()
}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// checkLog says what is wrong with a log file, or "". Badger replays a log
// up to its last complete record and drops the rest: after a crash the
// rest is a record cut short followed by the zeros of the preallocated
// file, but a file cut short ends inside a record. Those records were
// committed, and badger would drop them without a word.
func checkLog(path string) string {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Sprintf("cannot be read: %v", err)
	}
	defer func() { _ = f.Close() }()
	fi, err := f.Stat()
	if err != nil {
		return fmt.Sprintf("cannot be read: %v", err)
	}
	size := fi.Size()
	if size == 0 {
		// Created, and a crash came before badger sized it: it holds
		// nothing (Report.EmptyLogs).
		return ""
	}
	if size < logHeaderSize {
		return fmt.Sprintf("is %d bytes, shorter than its %d-byte header: it was cut short", size, logHeaderSize)
	}
	data, err := syscall.Mmap(int(f.Fd()), 0, int(size), syscall.PROT_READ, syscall.MAP_SHARED)
	if err != nil {
		return fmt.Sprintf("cannot be read: %v", err)
	}
	defer func() { _ = syscall.Munmap(data) }()
	end := logEnd(data)
	if end == size {
		return ""
	}
	tail := data[max(size-8, end):]
	for _, b := range tail {
		if b != 0 {
			return fmt.Sprintf("ends inside a record at byte %d of %d: it was cut short, and the commits after byte %d are lost", end, size, end)
		}
	}
	return ""
}

// logEnd returns the offset just after the last complete record of a log:
// a record outside a transaction, or the record that closes one.
func logEnd(data []byte) int64 {
	off, valid := logHeaderSize, logHeaderSize
	inTxn := false
	for {
		meta, n := logRecord(data[off:])
		if n == 0 {
			return int64(valid)
		}
		off += n
		switch {
		case meta&bitTxn != 0:
			inTxn = true
		case meta&bitFinTxn != 0:
			inTxn, valid = false, off
		case inTxn:
			return int64(valid)
		default:
			valid = off
		}
	}
}

// logRecord decodes the record at the start of b: a header (meta, user
// meta, then key length, value length and expiry as uvarints), the key, the
// value and a CRC-32C of all that. It returns the record's length, or 0
// if b does not start with a complete, intact record.
func logRecord(b []byte) (meta byte, n int) {
	if len(b) < 2 {
		return 0, 0
	}
	h := 2
	var fields [3]uint64
	for i := range fields {
		v, k := binary.Uvarint(b[h:])
		if k <= 0 {
			return 0, 0
		}
		fields[i], h = v, h+k
	}
	klen, vlen := fields[0], fields[1]
	if klen == 0 || klen > 1<<16 || vlen > uint64(len(b)) {
		return 0, 0
	}
	end := h + int(klen) + int(vlen)
	if end+crc32.Size > len(b) {
		return 0, 0
	}
	if crc32.Checksum(b[:end], castagnoli) != binary.BigEndian.Uint32(b[end:]) {
		return 0, 0
	}
	return b[0], end + crc32.Size
}
