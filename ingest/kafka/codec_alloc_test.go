package kafka

import (
	"bytes"
	"encoding/binary"
	"io"
	"runtime"
	"testing"

	"github.com/klauspost/compress/zstd"
	"github.com/segmentio/kafka-go/compress"
	"github.com/stretchr/testify/require"
)

// allocated is what f allocates on the heap, in bytes.
func allocated(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// readAll reads in through the bounded codec of c in codecs.
func readAll(codecs [len(compress.Codecs)]compress.Codec, c compress.Compression, in []byte) (int64, error) {
	r := codecs[c].NewReader(bytes.NewReader(in))
	defer func() { _ = r.Close() }()
	return io.Copy(io.Discard, r)
}

// zstdHugeWindow is a zstd frame of 10 bytes that declares a window of
// 512 MiB and holds one byte.
var zstdHugeWindow = []byte{
	0x28, 0xb5, 0x2f, 0xfd, // magic
	0x00,                  // no content size, no checksum, not single-segment
	19 << 3,               // window 2^(10+19)
	1 | 1<<1 | 1<<3, 0, 0, // last block, RLE, 1 byte
	'a',
}

// xerialHugeChunk is a xerial snappy stream whose first chunk declares
// 4 GiB - 1 bytes and holds four.
var xerialHugeChunk = []byte{
	0x82, 'S', 'N', 'A', 'P', 'P', 'Y', 0, 0, 0, 0, 1, 0, 0, 0, 1, // header
	0xff, 0xff, 0xff, 0xff, // chunk length
	0x01, 0x00, 'a', 'b',
}

// snappyHugeBlock is a snappy block of 6 bytes that declares it decodes
// to 4 GiB - 1 bytes.
var snappyHugeBlock = []byte{0xff, 0xff, 0xff, 0xff, 0x0f, 0x00}

const tooLargeAt1MiB = "kafka: a record batch decompresses to more than 1048576 bytes (kafka.maxDecompressedBytes)"

// Input that declares more than the bound is refused before what it
// declares is allocated: the attempt allocates less than twice the bound
// (1 MiB here), where kafka-go's own readers allocate 512 MiB (zstd) and
// 4 GiB (snappy).
func TestDeclaredSizeOverTheBoundIsNotAllocated(t *testing.T) {
	const bound = 1 << 20
	codecs := boundedTo(bound)
	var h zstd.Header
	require.NoError(t, h.Decode(zstdHugeWindow))
	require.Equal(t, uint64(512<<20), h.WindowSize)
	require.Len(t, zstdHugeWindow, 10)
	require.Equal(t, uint32(1<<32-1), binary.BigEndian.Uint32(xerialHugeChunk[16:]))

	for _, tc := range []struct {
		name string
		c    compress.Compression
		in   []byte
	}{
		{"zstd window", compress.Zstd, zstdHugeWindow},
		{"xerial chunk", compress.Snappy, xerialHugeChunk},
		{"snappy block", compress.Snappy, snappyHugeBlock},
		{"xerial block", compress.Snappy, append(append([]byte{}, xerialHugeChunk[:16]...), 0, 0, 0, 6, 0xff, 0xff, 0xff, 0xff, 0x0f, 0x00)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// Twice: the second time with pooled decoders.
			for range 2 {
				var n int64
				var err error
				a := allocated(func() { n, err = readAll(codecs, tc.c, tc.in) })
				t.Logf("%s: %d bytes allocated", tc.name, a)
				require.EqualError(t, err, tooLargeAt1MiB)
				require.True(t, isTooLarge(err))
				require.Zero(t, n)
				require.Less(t, a, uint64(2*bound))
			}
			// The pooled decoders read what is within the bound.
			var z bytes.Buffer
			w := codecs[tc.c].NewWriter(&z)
			_, err := w.Write(bytes.Repeat([]byte("audit"), bound/5))
			require.NoError(t, err)
			require.NoError(t, w.Close())
			n, err := readAll(codecs, tc.c, z.Bytes())
			require.NoError(t, err)
			require.Equal(t, int64(bound/5*5), n)
		})
	}
}
