package kafka

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/klauspost/compress/snappy"
	"github.com/klauspost/compress/zstd"
	kafkago "github.com/segmentio/kafka-go"
	"github.com/segmentio/kafka-go/compress"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// ReasonTooLarge is the poison reason of a record batch (or message) that
// decompresses to more than kafka.maxDecompressedBytes.
const ReasonTooLarge = "too_large"

// DefaultMaxDecompressedBytes is kafka.maxDecompressedBytes unset: four
// times the batches shippers produce (librdkafka's and the Java client's
// are at most 1 MB before compression), and small enough that six
// partitions fit kafka.memoryBudget (see budget.go).
const DefaultMaxDecompressedBytes = 4 << 20

// Decompression is bounded in kafka-go's own codec table.
//
// kafka-go inflates a compressed record batch whole, into one buffer, with
// the codec that compress.Codecs holds for the batch's compression: the
// table is global and a reader cannot be given codecs of its own. Its
// entries are replaced, once, by codecs that stop with
// TooLargeError past the bound, so that a batch of a few kilobytes cannot
// inflate to gigabytes. Every kafka-go reader in the process is bounded;
// writers compress as before.
//
// Bounding the output is not enough for zstd and snappy, whose readers
// allocate what the input declares before they output anything: a zstd
// window of up to 512 MiB, a xerial snappy chunk of up to 4 GiB. Those two
// read with decoders of their own, which refuse such input first.
func init() {
	for i, c := range compress.Codecs {
		if c == nil {
			continue
		}
		switch compress.Compression(c.Code()) {
		case compress.Zstd:
			c = &zstdCodec{Codec: c}
		case compress.Snappy:
			c = &snappyCodec{Codec: c}
		}
		compress.Codecs[i] = &boundedCodec{Codec: c}
	}
}

// maxDecompressed is the bound in bytes; New sets it from the config.
var maxDecompressed atomic.Int64

func init() { maxDecompressed.Store(DefaultMaxDecompressedBytes) }

// SetMaxDecompressedBytes sets the bound of every reader in the process.
func SetMaxDecompressedBytes(n int64) { maxDecompressed.Store(n) }

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
type boundedCodec struct{ compress.Codec }

func (c *boundedCodec) NewReader(r io.Reader) io.ReadCloser {
	limit := maxDecompressed.Load()
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
type zstdCodec struct{ compress.Codec }

var zstdDecoders sync.Pool // *zstd.Decoder

func (c *zstdCodec) NewReader(r io.Reader) io.ReadCloser {
	limit := maxDecompressed.Load()
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
type snappyCodec struct{ compress.Codec }

var snappyReaders sync.Pool // *snappyReader

func (c *snappyCodec) NewReader(r io.Reader) io.ReadCloser {
	s, _ := snappyReaders.Get().(*snappyReader)
	if s == nil {
		s = new(snappyReader)
	}
	limit := maxDecompressed.Load()
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

// batchEnd returns the offset after the record batch that holds offset, as
// its header says, without decompressing it: kafka-go cannot, since it
// decompresses a batch before anything else of it is read. It asks the
// partition's leader with a Fetch request of its own (version 11), over a
// connection that r's dialer sets up (TLS and SASL included), and reads
// the batch's first offset and last offset delta from the raw bytes.
func batchEnd(ctx context.Context, r *kafkago.Reader, offset int64) (int64, error) {
	rc := r.Config()
	d := *kafkago.DefaultDialer
	if rc.Dialer != nil {
		d = *rc.Dialer
	}
	// The connection the request goes over is what DialFunc returns; TLS
	// is set up here so that it is a connection of plain Kafka requests.
	var conn net.Conn
	tlsConfig := d.TLS
	d.TLS = nil
	dial := d.DialFunc
	if dial == nil {
		dial = (&net.Dialer{KeepAlive: d.KeepAlive}).DialContext
	}
	d.DialFunc = func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := dial(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		if tlsConfig != nil {
			cfg := tlsConfig
			if cfg.ServerName == "" {
				cfg = cfg.Clone()
				cfg.ServerName, _, _ = net.SplitHostPort(addr)
			}
			tc := tls.Client(c, cfg)
			if err := tc.HandshakeContext(ctx); err != nil {
				_ = c.Close()
				return nil, err
			}
			c = tc
		}
		conn = c
		return c, nil
	}
	var kc *kafkago.Conn
	var err error
	for _, b := range rc.Brokers {
		if kc, err = d.DialLeader(ctx, "tcp", b, rc.Topic, rc.Partition); err == nil {
			break
		}
	}
	if err != nil {
		return 0, err
	}
	defer func() { _ = kc.Close() }()
	deadline := time.Now().Add(10 * time.Second)
	if dl, ok := ctx.Deadline(); ok && dl.Before(deadline) {
		deadline = dl
	}
	_ = conn.SetDeadline(deadline)

	req := kmsg.NewPtrFetchRequest()
	req.Version = 11
	req.MaxWaitMillis = 0
	req.MinBytes = 1
	// The first batch comes whole whatever the limits (KIP-74): ask for
	// nothing more.
	req.MaxBytes = 1
	tp := kmsg.NewFetchRequestTopicPartition()
	tp.Partition = int32(rc.Partition)
	tp.FetchOffset = offset
	tp.PartitionMaxBytes = 1
	t := kmsg.NewFetchRequestTopic()
	t.Topic = rc.Topic
	t.Partitions = []kmsg.FetchRequestTopicPartition{tp}
	req.Topics = []kmsg.FetchRequestTopic{t}
	const correlationID = 0x5375
	if _, err := conn.Write(kmsg.NewRequestFormatter(kmsg.FormatterClientID(d.ClientID)).AppendRequest(nil, req, correlationID)); err != nil {
		return 0, err
	}
	var size [4]byte
	if _, err := io.ReadFull(conn, size[:]); err != nil {
		return 0, err
	}
	// The answer holds one batch, at most the broker's limit on a batch.
	n := binary.BigEndian.Uint32(size[:])
	if n < 4 || n > 1<<30 {
		return 0, fmt.Errorf("fetch answer of %d bytes", n)
	}
	body := make([]byte, n)
	if _, err := io.ReadFull(conn, body); err != nil {
		return 0, err
	}
	if id := int32(binary.BigEndian.Uint32(body)); id != correlationID {
		return 0, fmt.Errorf("fetch answer to request %d, want %d", id, correlationID)
	}
	resp := kmsg.NewPtrFetchResponse()
	resp.Version = req.Version
	if err := resp.ReadFrom(body[4:]); err != nil {
		return 0, err
	}
	for _, rt := range resp.Topics {
		for _, p := range rt.Partitions {
			if int(p.Partition) != rc.Partition {
				continue
			}
			if err := kafkago.Error(p.ErrorCode); p.ErrorCode != 0 {
				return 0, err
			}
			return firstBatchEnd(p.RecordBatches, offset)
		}
	}
	return 0, errors.New("fetch answer without the partition")
}

// firstBatchEnd reads the header of the first record batch (or legacy
// message set entry) of raw: the offset after its last record.
func firstBatchEnd(raw []byte, offset int64) (int64, error) {
	// baseOffset int64, length int32, partitionLeaderEpoch int32, magic
	// int8, crc int32, attributes int16, lastOffsetDelta int32.
	if len(raw) < 17 {
		return 0, fmt.Errorf("no record batch at offset %d", offset)
	}
	base := int64(binary.BigEndian.Uint64(raw))
	var last int64
	switch magic := raw[16]; magic {
	case 2:
		if len(raw) < 27 {
			return 0, fmt.Errorf("truncated record batch at offset %d", offset)
		}
		last = base + int64(int32(binary.BigEndian.Uint32(raw[23:])))
	case 0, 1:
		// A compressed legacy message is a wrapper whose offset is that
		// of the last message inside.
		last = base
	default:
		return 0, fmt.Errorf("record batch of magic %d at offset %d", magic, offset)
	}
	return max(last+1, offset+1), nil
}
