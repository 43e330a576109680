package kafka

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"

	"github.com/klauspost/compress/snappy"
	"github.com/klauspost/compress/zstd"
	kafkago "github.com/segmentio/kafka-go"
	"github.com/segmentio/kafka-go/compress"
)

// ReasonTooLarge is the poison reason of a record batch (or message) that
// decompresses to more than kafka.maxDecompressedBytes.
const ReasonTooLarge = "too_large"

// DefaultMaxDecompressedBytes is kafka.maxDecompressedBytes unset: four
// times the batches shippers produce (librdkafka's and the Java client's
// are at most 1 MB before compression), and small enough that six
// partitions fit kafka.memoryBudget (see budget.go).
const DefaultMaxDecompressedBytes = 4 << 20

// InstallBoundedCodecs bounds decompression in kafka-go's own codec table
// to limit bytes a record batch; zero or less means
// DefaultMaxDecompressedBytes.
//
// kafka-go inflates a compressed record batch whole, into one buffer, with
// the codec that compress.Codecs holds for the batch's compression: the
// table is global and a reader cannot be given codecs of its own. The
// first call replaces its entries by codecs that stop with TooLargeError
// past the bound, so that a batch of a few kilobytes cannot inflate to
// gigabytes; every call sets the bound, which is the process's: the last
// call's holds for every kafka-go reader. Writers compress as before.
//
// New calls it with kafka.maxDecompressedBytes, and NewPartitionReader,
// which builds every reader Sunset reads with, with its config's, so that
// no reader is built before the table is bounded. Call it before kafka-go
// reads or writes anything else in the process: the table is read without
// a lock.
func InstallBoundedCodecs(limit int64) {
	if limit <= 0 {
		limit = DefaultMaxDecompressedBytes
	}
	maxDecompressed.Store(limit)
	installCodecs.Do(func() { compress.Codecs = boundedCodecs(&maxDecompressed) })
}

var (
	// maxDecompressed is the bound of the codecs in kafka-go's table.
	maxDecompressed atomic.Int64
	installCodecs   sync.Once
)

// boundedCodecs is kafka-go's codec table with readers that stop past the
// bound limit holds.
//
// Bounding the output is not enough for zstd and snappy, whose readers
// allocate what the input declares before they output anything: a zstd
// window of up to 512 MiB, a xerial snappy chunk of up to 4 GiB. Those two
// read with decoders of their own, which refuse such input first.
func boundedCodecs(limit *atomic.Int64) [len(compress.Codecs)]compress.Codec {
	// kafka-go's own codecs, which its table holds until it is bounded.
	stock := [len(compress.Codecs)]compress.Codec{
		compress.Gzip:   &compress.GzipCodec,
		compress.Snappy: &compress.SnappyCodec,
		compress.Lz4:    &compress.Lz4Codec,
		compress.Zstd:   &compress.ZstdCodec,
	}
	var out [len(compress.Codecs)]compress.Codec
	for i, c := range stock {
		if c == nil {
			continue
		}
		switch compress.Compression(i) {
		case compress.Zstd:
			c = &zstdCodec{Codec: c, limit: limit}
		case compress.Snappy:
			c = &snappyCodec{Codec: c, limit: limit}
		}
		out[i] = &boundedCodec{Codec: c, limit: limit}
	}
	return out
}

// TooLargeError is what reading a record batch that decompresses to more
// than the bound returns.
type TooLargeError struct{ Limit int64 }

func (e *TooLargeError) Error() string {
	return fmt.Sprintf("kafka: a record batch decompresses to more than %d bytes (kafka.maxDecompressedBytes)", e.Limit)
}

// As makes the error a kafka-go protocol error (MESSAGE_TOO_LARGE) too:
// kafka-go's reader hands those to FetchMessage, where other errors are
// only logged and the same fetch is tried again without end.
func (e *TooLargeError) As(target any) bool {
	if p, ok := target.(*kafkago.Error); ok {
		*p = kafkago.MessageSizeTooLarge
		return true
	}
	return false
}

func isTooLarge(err error) bool {
	var e *TooLargeError
	return errors.As(err, &e)
}

// boundedCodec is a codec whose readers stop past the bound.
type boundedCodec struct {
	compress.Codec
	limit *atomic.Int64
}

func (c *boundedCodec) NewReader(r io.Reader) io.ReadCloser {
	limit := c.limit.Load()
	return &boundedReader{rc: c.Codec.NewReader(r), left: limit, limit: limit}
}

type boundedReader struct {
	rc          io.ReadCloser
	left, limit int64
}

func (b *boundedReader) Read(p []byte) (int, error) {
	if b.left <= 0 {
		// At the bound: the batch is over it if anything follows.
		var one [1]byte
		n, err := b.rc.Read(one[:])
		if n > 0 {
			return 0, &TooLargeError{Limit: b.limit}
		}
		return 0, err
	}
	if int64(len(p)) > b.left {
		p = p[:b.left]
	}
	n, err := b.rc.Read(p)
	b.left -= int64(n)
	return n, err
}

func (b *boundedReader) Close() error { return b.rc.Close() }

// zstdMinWindow is the least window a zstd frame may declare, whatever the
// bound: kafka-go's own writer (klauspost/compress at its default level)
// declares 8 MiB for every batch it does not know the size of, however
// small the batch.
const zstdMinWindow = 8 << 20

// zstdCodec reads zstd with decoders that refuse a frame declaring a
// window (or, single-segment, a content size) over the bound, or over
// zstdMinWindow if that is more, before they allocate it; writers are
// kafka-go's. kafka-go's decoders allow 512 MiB, allocate it for a frame
// of ten bytes, and keep it in their pool.
type zstdCodec struct {
	compress.Codec
	limit *atomic.Int64
}

var zstdDecoders sync.Pool // *zstd.Decoder

func (c *zstdCodec) NewReader(r io.Reader) io.ReadCloser {
	limit := c.limit.Load()
	window := uint64(max(limit, zstdMinWindow))
	window = min(window, 1<<41) // what WithDecoderMaxWindow takes
	opts := []zstd.DOption{zstd.WithDecoderMaxWindow(window), zstd.WithDecoderMaxMemory(window)}
	d, _ := zstdDecoders.Get().(*zstd.Decoder)
	var err error
	if d != nil {
		err = d.ResetWithOptions(r, opts...)
	} else {
		d, err = zstd.NewReader(r, append(opts,
			zstd.WithDecoderConcurrency(1),
			zstd.WithDecoderLowmem(true),
			// Always stream: a whole decode stops at the bound with an
			// error and none of the output.
			zstd.WithDecodeBuffersBelow(0))...)
	}
	if err != nil {
		return &zstdReader{err: err}
	}
	return &zstdReader{dec: d, limit: limit}
}

type zstdReader struct {
	dec   *zstd.Decoder
	limit int64
	err   error
}

func (z *zstdReader) Read(p []byte) (int, error) {
	if z.dec == nil {
		if z.err == nil {
			return 0, io.ErrClosedPipe
		}
		return 0, z.err
	}
	n, err := z.dec.Read(p)
	if errors.Is(err, zstd.ErrWindowSizeExceeded) || errors.Is(err, zstd.ErrDecoderSizeExceeded) {
		err = &TooLargeError{Limit: z.limit}
	}
	return n, err
}

func (z *zstdReader) Close() error {
	if z.dec != nil {
		// Let go of the input; the decoder keeps at most a window.
		if z.dec.Reset(bytes.NewReader(nil)) == nil {
			zstdDecoders.Put(z.dec)
		}
		z.dec = nil
	}
	return nil
}

// Snappy, as Kafka clients write it, is either one block or a xerial
// stream: a 16-byte header, then chunks that are each a 4-byte length and
// a block. Writers chunk by 32 KiB (kafka-go, snappy-java).
var xerialMagic = []byte{0x82, 'S', 'N', 'A', 'P', 'P', 'Y', 0}

// snappyMaxChunk is the most a snappy block may decode to past the bound
// and still be decoded, so that a batch over the bound stops exactly at it
// (a block is decoded whole); a larger block over the bound is refused
// before it is decoded.
const snappyMaxChunk = 64 << 10

// snappyCodec reads snappy without allocating more than the input holds
// or the bound allows; writers are kafka-go's. kafka-go's reader allocates
// the length a xerial chunk declares, up to 4 GiB, before reading it.
type snappyCodec struct {
	compress.Codec
	limit *atomic.Int64
}

var snappyReaders sync.Pool // *snappyReader

func (c *snappyCodec) NewReader(r io.Reader) io.ReadCloser {
	s, _ := snappyReaders.Get().(*snappyReader)
	if s == nil {
		s = new(snappyReader)
	}
	limit := c.limit.Load()
	s.r, s.limit, s.left = r, limit, limit
	s.started, s.framed, s.last = false, false, false
	s.in.Reset()
	s.out, s.off, s.err = s.out[:0], 0, nil
	return s
}

type snappyReader struct {
	r            io.Reader
	limit, left  int64 // left: what the bound allows yet; below 0 past it
	started      bool
	framed, last bool
	in           bytes.Buffer // a block
	out          []byte       // what it decodes to
	off          int
	err          error
}

func (s *snappyReader) Read(p []byte) (int, error) {
	for s.off == len(s.out) {
		if s.err != nil {
			return 0, s.err
		}
		s.err = s.next()
	}
	n := copy(p, s.out[s.off:])
	s.off += n
	return n, nil
}

func (s *snappyReader) tooLarge() error { return &TooLargeError{Limit: s.limit} }

// maxBlock is the most bytes a block may take that decodes to what the
// bound allows, or snappyMaxChunk (snappy.MaxEncodedLen of it).
func (s *snappyReader) maxBlock() int64 {
	n := max(s.left, snappyMaxChunk)
	return 32 + n + n/6
}

// next reads and decodes the next block into out.
func (s *snappyReader) next() error {
	s.out, s.off = s.out[:0], 0
	if s.last {
		return io.EOF
	}
	s.in.Reset()
	if !s.started {
		s.started = true
		var head [16]byte
		n, err := io.ReadFull(s.r, head[:])
		switch {
		case n == 0 && err != nil:
			return err
		case n == len(head) && bytes.Equal(head[:8], xerialMagic):
			s.framed = true
		case err != nil && err != io.ErrUnexpectedEOF:
			return err
		default:
			// One block: all of the input.
			s.last = true
			s.in.Write(head[:n])
			if err == nil {
				if _, err := s.in.ReadFrom(io.LimitReader(s.r, s.maxBlock()+1-int64(n))); err != nil {
					return err
				}
			}
			if int64(s.in.Len()) > s.maxBlock() {
				return s.tooLarge()
			}
			return s.decode()
		}
	}
	var size [4]byte
	if _, err := io.ReadFull(s.r, size[:]); err != nil {
		return err // io.EOF between chunks is the end
	}
	n := int64(binary.BigEndian.Uint32(size[:]))
	if n > s.maxBlock() {
		return s.tooLarge()
	}
	// Grows with what the input holds, not with what n says.
	if _, err := io.CopyN(&s.in, s.r, n); err != nil {
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return err
	}
	return s.decode()
}

func (s *snappyReader) decode() error {
	n, err := snappy.DecodedLen(s.in.Bytes())
	if err != nil {
		return err
	}
	if int64(n) > s.left && n > snappyMaxChunk {
		return s.tooLarge()
	}
	if s.out, err = snappy.Decode(s.out[:cap(s.out)], s.in.Bytes()); err != nil {
		s.out = s.out[:0]
		return err
	}
	s.left -= int64(len(s.out))
	return nil
}

func (s *snappyReader) Close() error {
	if s.r == nil {
		return nil
	}
	s.r = nil
	// Keep buffers of what clients write, not of one big block.
	if cap(s.out) <= 2*snappyMaxChunk && s.in.Cap() <= 2*snappyMaxChunk {
		snappyReaders.Put(s)
	}
	return nil
}
