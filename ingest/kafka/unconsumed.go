package kafka

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	kafkago "github.com/segmentio/kafka-go"
)

// minUnconsumedAfter is the least time a partition's messages wait, with
// no commit from any member, before the partition counts as unconsumed:
// under load one commit can take seconds.
const minUnconsumedAfter = 10 * time.Second

// maxRejoinPause bounds the pause between two rejoins for partitions that
// stay unconsumed, so that a member that is stuck while alive (a full
// disk) costs the group a rebalance at most this often.
const maxRejoinPause = 10 * time.Minute

// UnconsumedAfter is how long a partition's messages may wait with no
// commit from any member of the group before it counts as unconsumed: two
// sessions and a rebalance, the longest a partition is between owners when
// a member dies, and at least 10s.
func (c Config) UnconsumedAfter() time.Duration {
	return max(2*c.SessionTimeout+c.RebalanceTimeout, minUnconsumedAfter)
}

// partitionProgress is what a groupWatch knows of one partition.
type partitionProgress struct {
	// committed is the group's committed offset, -1 for none.
	committed int64
	// end is the partition's end when committed was last seen to move or
	// to be caught up; since is when.
	end   int64
	since time.Time
}

// groupWatch finds the partitions of the consumed topics that no member of
// the group consumes, from the group's committed offsets and the
// partitions' ends, which every member commits to as it goes. It asks the
// brokers, not the group's members, so it sees a partition held by a
// member that is gone as well as one that no member holds.
type groupWatch struct {
	client *kafkago.Client
	group  string
	topics []string
	// earliest is whether the group starts a partition it never
	// committed at its first offset.
	earliest bool
	after    time.Duration
	now      func() time.Time
	seen     map[string]map[int]partitionProgress
}

func newGroupWatch(cfg Config, d *kafkago.Dialer) *groupWatch {
	return &groupWatch{
		client: &kafkago.Client{Addr: kafkago.TCP(cfg.Brokers...), Timeout: d.Timeout, Transport: &kafkago.Transport{
			ClientID: cfg.ClientID, TLS: d.TLS, SASL: d.SASLMechanism, DialTimeout: d.Timeout,
		}},
		group: cfg.GroupID, topics: cfg.Topics, earliest: cfg.startOffset() == kafkago.FirstOffset, after: cfg.UnconsumedAfter(), now: time.Now,
		seen: map[string]map[int]partitionProgress{},
	}
}

// check returns, by topic, the partitions whose messages have waited
// longer than w.after with no commit from any member of the group. A
// partition waits when the group has committed less than its end. One
// that the group never committed waits when it holds messages, for a group
// that starts at the earliest offset, and else only for messages that came
// after check first saw it: a group that starts at the latest offset never
// reads those before.
func (w *groupWatch) check(ctx context.Context) (map[string][]int, error) {
	meta, err := w.client.Metadata(ctx, &kafkago.MetadataRequest{Topics: w.topics})
	if err != nil {
		return nil, fmt.Errorf("reading the topics' partitions: %w", err)
	}
	ids := map[string][]int{}
	ends := map[string][]kafkago.OffsetRequest{}
	for _, t := range meta.Topics {
		if t.Error != nil {
			continue
		}
		for _, p := range t.Partitions {
			ids[t.Name] = append(ids[t.Name], p.ID)
			ends[t.Name] = append(ends[t.Name], kafkago.FirstOffsetOf(p.ID), kafkago.LastOffsetOf(p.ID))
		}
	}
	if len(ids) == 0 {
		return nil, nil
	}
	listed, err := w.client.ListOffsets(ctx, &kafkago.ListOffsetsRequest{Topics: ends})
	if err != nil {
		return nil, fmt.Errorf("reading the partitions' ends: %w", err)
	}
	fetched, err := w.client.OffsetFetch(ctx, &kafkago.OffsetFetchRequest{GroupID: w.group, Topics: ids})
	if err == nil {
		err = fetched.Error
	}
	if err != nil {
		return nil, fmt.Errorf("reading the group's committed offsets: %w", err)
	}
	committed := map[string]map[int]int64{}
	for topic, parts := range fetched.Topics {
		committed[topic] = map[int]int64{}
		for _, p := range parts {
			if p.Error == nil {
				committed[topic][p.Partition] = p.CommittedOffset
			}
		}
	}
	now := w.now()
	unconsumed := map[string][]int{}
	for topic, parts := range listed.Topics {
		if w.seen[topic] == nil {
			w.seen[topic] = map[int]partitionProgress{}
		}
		for _, p := range parts {
			c, ok := committed[topic][p.Partition]
			if p.Error != nil || !ok {
				continue
			}
			was, known := w.seen[topic][p.Partition]
			if !known || !w.waiting(c, p.FirstOffset, p.LastOffset, was) {
				w.seen[topic][p.Partition] = partitionProgress{committed: c, end: p.LastOffset, since: now}
				continue
			}
			if now.Sub(was.since) >= w.after {
				unconsumed[topic] = append(unconsumed[topic], p.Partition)
			}
		}
		slices.Sort(unconsumed[topic])
	}
	return unconsumed, nil
}

// waiting is whether a partition whose group commit was at committed, its
// messages from first to end (excluded), has had messages waiting since
// was, with no commit since then.
func (w *groupWatch) waiting(committed, first, end int64, was partitionProgress) bool {
	switch {
	case committed != was.committed || end <= committed:
		return false
	case committed >= 0:
		return true
	case w.earliest:
		return end > first
	default:
		return end > was.end
	}
}

// close drops the watch's connections.
func (w *groupWatch) close() {
	if t, ok := w.client.Transport.(*kafkago.Transport); ok {
		t.CloseIdleConnections()
	}
}

// notAssigned is what of unconsumed is not in assigned.
func notAssigned(unconsumed map[string][]int, assigned map[string][]kafkago.PartitionAssignment) map[string][]int {
	out := map[string][]int{}
	for topic, parts := range unconsumed {
		for _, p := range parts {
			if !slices.ContainsFunc(assigned[topic], func(pa kafkago.PartitionAssignment) bool { return pa.ID == p }) {
				out[topic] = append(out[topic], p)
			}
		}
	}
	return out
}

// partitionList writes partitions as "0, 2, 3".
func partitionList(parts []int) string {
	s := make([]string, len(parts))
	for i, p := range parts {
		s[i] = strconv.Itoa(p)
	}
	return strings.Join(s, ", ")
}

// sortedTopics is the topics of m in order, so that logs and warnings keep
// one order.
func sortedTopics[V any](m map[string]V) []string {
	return slices.Sorted(maps.Keys(m))
}

// errRejoin ends runGroup when the consumer leaves its group to join it
// again.
var errRejoin = errors.New("kafka: leaving the consumer group to rejoin it")

// watchGroup looks, once a session timeout, for partitions that no member
// of the group consumes, until ctx is done. When some are not this
// member's, it cancels ctx with errRejoin: leaving the group and joining
// again makes the group rebalance, and a rebalance drops a member that
// does not rejoin, however the coordinator lost track of its session.
// That is once at first, then after a pause that doubles from
// UnconsumedAfter up to maxRejoinPause while partitions stay unconsumed,
// since a member that is alive but stuck is given them again.
func (c *Consumer) watchGroup(ctx context.Context, rejoin context.CancelCauseFunc) {
	tick := time.NewTicker(c.cfg.SessionTimeout)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		unconsumed, err := c.watch.check(ctx)
		if err != nil {
			if ctx.Err() == nil {
				c.log.Debug().Err(err).Msg("looking for partitions that no member consumes")
			}
			continue
		}
		others := c.noteUnconsumed(unconsumed)
		if len(others) == 0 {
			continue
		}
		var where []string
		for _, topic := range sortedTopics(others) {
			where = append(where, topic+": "+partitionList(others[topic]))
		}
		c.log.Warn().Str("unconsumed", strings.Join(where, "; ")).Dur("waited", c.watch.after).
			Msg("partitions that no member of the consumer group consumes; leaving the group to rejoin it, so that it rebalances")
		c.metrics.rejoins.Inc()
		if c.rejoining != nil {
			c.rejoining(others)
		}
		rejoin(errRejoin)
		return
	}
}

// noteUnconsumed records what a look at the group found unconsumed, and
// returns the partitions among them that this member does not hold when
// it is time to rejoin for them.
func (c *Consumer) noteUnconsumed(unconsumed map[string][]int) map[string][]int {
	for _, t := range c.cfg.Topics {
		c.metrics.unconsumed.WithLabelValues(t).Set(float64(len(unconsumed[t])))
	}
	now := c.watch.now()
	c.mu.Lock()
	defer c.mu.Unlock()
	c.unconsumed = unconsumed
	if len(unconsumed) == 0 {
		c.rejoinPause = 0
		return nil
	}
	if c.assignment == nil || now.Before(c.nextRejoin) {
		return nil
	}
	others := notAssigned(unconsumed, c.assignment)
	if len(others) == 0 {
		return nil
	}
	c.rejoinPause = min(max(c.watch.after, 2*c.rejoinPause), maxRejoinPause)
	c.nextRejoin = now.Add(c.rejoinPause)
	return others
}

// Warnings are what a ready consumer cannot fix alone: partitions that no
// member of the group consumes, and more partitions assigned than
// kafka.maxPartitions.
func (c *Consumer) Warnings() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []string
	for _, topic := range sortedTopics(c.unconsumed) {
		out = append(out, fmt.Sprintf("kafka topic %s: partitions %s have had messages waiting for more than %s that no member of group %s consumed (see inputs/kafka.md#partitions-no-member-consumes)",
			topic, partitionList(c.unconsumed[topic]), c.watch.after, c.cfg.GroupID))
	}
	if c.assignment != nil && c.assigned > c.cfg.MaxPartitions {
		out = append(out, fmt.Sprintf("kafka: %d partitions assigned, more than kafka.maxPartitions (%d): kafka.memoryBudget does not hold the rest (see inputs/kafka.md#memory)",
			c.assigned, c.cfg.MaxPartitions))
	}
	return out
}
