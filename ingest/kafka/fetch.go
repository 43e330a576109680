package kafka

import (
	"context"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"time"

	kafkago "github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kmsg"
)

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
