package kafka

import (
	"context"
	"testing"

	"github.com/rs/zerolog"
	kafkago "github.com/segmentio/kafka-go"
	"github.com/stretchr/testify/require"

	"github.com/kube-sunset/sunset/internal/testutil/kafkatest"
)

// The header of a record batch says where it ends, whatever its
// compression, without inflating it.
func TestBatchEndReadsTheHeader(t *testing.T) {
	brokers := kafkatest.Brokers(t)
	topic := kafkatest.Topic(t, brokers, "batchend", 1)
	first, _ := events("a", 2)
	kafkatest.ProduceBatch(t, brokers, topic, 0, kafkago.Zstd, first...)               // 0-1
	kafkatest.ProduceBatch(t, brokers, topic, 0, kafkago.Lz4, bombMessages(5, 10)...)  // 2-6
	kafkatest.ProduceBatch(t, brokers, topic, 0, kafkago.Compression(0), first[:1]...) // 7
	cfg := Config{Brokers: brokers}.WithDefaults()
	d, err := cfg.Dialer()
	require.NoError(t, err)
	r := NewPartitionReader(cfg, d, topic, 0, zerolog.Nop())
	defer func() { _ = r.Close() }()
	for offset, want := range map[int64]int64{0: 2, 1: 2, 2: 7, 4: 7, 6: 7, 7: 8} {
		next, err := batchEnd(context.Background(), r, offset)
		require.NoError(t, err)
		require.Equal(t, want, next, "offset %d", offset)
	}
}
