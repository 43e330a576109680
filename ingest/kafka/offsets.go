package kafka

import (
	"context"
	"encoding/binary"
	"strconv"
	"sync"
	"time"

	"github.com/rs/zerolog"
	kafkago "github.com/segmentio/kafka-go"
)

func (c *Consumer) cursorName(topic string, partition int) string {
	return "kafka:" + c.cfg.GroupID + ":" + topic + ":" + strconv.Itoa(partition)
}

// startOffset is where a partition resumes: the later of Sunset's own
// committed position and the group's. Sunset's is ahead after a crash
// between its commit and the group commit; the group's is ahead when
// another replica consumed the partition meanwhile.
func (c *Consumer) startOffset(topic string, pa kafkago.PartitionAssignment) (int64, error) {
	raw, ok, err := c.cursors.Cursor(c.cursorName(topic, pa.ID))
	if err != nil {
		return 0, err
	}
	if ok && len(raw) == 8 {
		stored := int64(binary.BigEndian.Uint64(raw))
		if pa.Offset < 0 || stored > pa.Offset {
			return stored, nil
		}
	}
	return pa.Offset, nil
}

// offsetCommitter tells the group the positions committed to badger, for
// every partition of a generation in one request at a time: requests from
// each partition at once would share the coordinator connection, on which
// kafka-go spins waiting for its own response.
type offsetCommitter struct {
	gen *kafkago.Generation
	log zerolog.Logger

	mu      sync.Mutex
	pending map[string]map[int]int64
	kick    chan struct{}
	// sending serialises the requests.
	sending sync.Mutex
}

func newOffsetCommitter(gen *kafkago.Generation, log zerolog.Logger) *offsetCommitter {
	return &offsetCommitter{gen: gen, log: log, pending: map[string]map[int]int64{}, kick: make(chan struct{}, 1)}
}

// note records that a partition is committed up to next, to be told to
// the group soon.
func (o *offsetCommitter) note(topic string, partition int, next int64) {
	o.mu.Lock()
	if o.pending[topic] == nil {
		o.pending[topic] = map[int]int64{}
	}
	o.pending[topic][partition] = next
	o.mu.Unlock()
	select {
	case o.kick <- struct{}{}:
	default:
	}
}

// groupCommitRetry is how long a failed group commit waits before it is
// tried again. The partition may have nothing more to read, so no later
// batch would carry the position to the group.
const groupCommitRetry = time.Second

// run tells the group what is noted, as it is noted, until the generation
// ends.
func (o *offsetCommitter) run(ctx context.Context) {
	var retry <-chan time.Time
	for {
		select {
		case <-ctx.Done():
			_ = o.flush()
			return
		case <-o.kick:
		case <-retry:
		}
		retry = nil
		if o.flush() != nil {
			retry = time.After(groupCommitRetry)
		}
	}
}

// flush tells the group what is noted, and returns once it has answered.
func (o *offsetCommitter) flush() error {
	o.sending.Lock()
	defer o.sending.Unlock()
	o.mu.Lock()
	offsets := o.pending
	o.pending = map[string]map[int]int64{}
	o.mu.Unlock()
	if len(offsets) == 0 {
		return nil
	}
	err := o.gen.CommitOffsets(offsets)
	if err != nil {
		// Not fatal: Sunset's own positions are committed. The group's
		// are tried again, unless newer ones were noted meanwhile.
		o.log.Warn().Err(err).Msg("committing offsets to the group")
		o.mu.Lock()
		for topic, parts := range offsets {
			for p, next := range parts {
				if _, newer := o.pending[topic][p]; !newer {
					if o.pending[topic] == nil {
						o.pending[topic] = map[int]int64{}
					}
					o.pending[topic][p] = next
				}
			}
		}
		o.mu.Unlock()
	}
	return err
}
