package kafka

import (
	"context"
	"fmt"
	"maps"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/rs/zerolog"
	kafkago "github.com/segmentio/kafka-go"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/kube-sunset/sunset/internal/testutil/ingesttest"
	"github.com/kube-sunset/sunset/internal/testutil/kafkatest"
)

// A member killed inside its first JoinGroup, while the survivor leads the
// group, may keep half of the partitions for good on the test broker:
// kfake starts a new member's session timer only once its JoinGroup answer
// is handed to the connection (group.reply in kfake's groups.go), and
// clientReq.reply (client_conn.go) hands an answer to a dead connection
// with a chance of one half, as its select finds both the connection's
// buffered channel free and its done channel closed. So members are killed
// until one stays: then no rebalance follows, however long the broker and
// the survivor run, here under load on every CPU. The survivor finds the
// partitions that no member consumes, leaves the group and joins it again;
// the rebalance drops the dead member, and every message counts once.
func TestRejoinsWhenPartitionsHaveNoConsumer(t *testing.T) {
	cluster, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.GroupMinSessionTimeout(time.Second))
	require.NoError(t, err)
	t.Cleanup(cluster.Close)
	brokers := cluster.ListenAddrs()
	topic := kafkatest.Topic(t, brokers, "unconsumed", 4)
	group := "unconsumed-" + topic
	const session = 2 * time.Second

	ing := &ingesttest.Flaky{}
	reg := prometheus.NewRegistry()
	c, err := New(Options{Config: Config{Brokers: brokers, Topics: []string{topic}, GroupID: group, SessionTimeout: session,
		RetryBackoff: 5 * time.Millisecond}, DefaultCluster: "c", Ingester: ing, Tallies: ing, Cursors: ing, Logger: zerolog.Nop(), Registerer: reg})
	require.NoError(t, err)
	generations := make(chan []int, 16)
	c.joined = func(_ int32, a map[string][]kafkago.PartitionAssignment) { generations <- assignedIDs(a[topic]) }
	type rejoin struct {
		unconsumed map[string][]int
		members    []string
		membersErr error
		warnings   []string
	}
	rejoins := make(chan rejoin, 4)
	c.rejoining = func(u map[string][]int) {
		members, err := groupMembers(brokers, group)
		rejoins <- rejoin{unconsumed: u, members: members, membersErr: err, warnings: c.Warnings()}
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	stop := sync.OnceValue(func() error {
		cancel()
		return <-done
	})
	t.Cleanup(func() { _ = stop() })
	require.Equal(t, []int{0, 1, 2, 3}, receive(t, generations, 30*time.Second), "alone in the group")

	keepCPUsBusy(t)
	var (
		held []int
		want []string
		got  rejoin
	)
	for attempt := 0; got.unconsumed == nil; attempt++ {
		require.Less(t, attempt, 10, "kfake kept no killed member: each stays with a chance of one half")
		kafkatest.JoinAndDie(t, brokers, group, session, topic)
		held = receive(t, generations, 30*time.Second)
		if len(held) == 4 {
			// No generation took the dead member in (under the race
			// detector its join can meet the survivor between two
			// generations): kill another.
			continue
		}
		require.Len(t, held, 2, "the survivor leads the rebalance and gives the dead member half of the partitions")
		for p := range 4 {
			msgs, ids := events(fmt.Sprintf("a%d-p%d", attempt, p), 25)
			kafkatest.ProduceBatch(t, brokers, topic, p, kafkago.Compression(0), msgs...)
			want = append(want, ids...)
		}
		// Either kfake ends the dead member's session, as Kafka does, and
		// the survivor is alone again, or it never does: the partitions
		// wait two sessions and a rebalance (at least 10s) and the
		// survivor rejoins.
		select {
		case alone := <-generations:
			require.Equal(t, []int{0, 1, 2, 3}, alone, "the dead member's session ended")
		case got = <-rejoins:
		case <-time.After(60 * time.Second):
			t.Fatal("neither a rebalance nor a rejoin within 60s")
		}
	}
	orphaned := slices.DeleteFunc([]int{0, 1, 2, 3}, func(p int) bool { return slices.Contains(held, p) })
	// The survivor rejoins as soon as one orphaned partition has waited
	// long enough: the other's wait may have started a check later (its
	// last commit came with the rebalance), so it is there or not yet.
	unconsumed := got.unconsumed[topic]
	require.Equal(t, []string{topic}, slices.Collect(maps.Keys(got.unconsumed)))
	require.NotEmpty(t, unconsumed)
	require.Subset(t, orphaned, unconsumed, "only partitions the dead member holds")
	require.NoError(t, got.membersErr)
	require.Equal(t, []string{"killed-in-join", "sunset"}, got.members)
	require.Equal(t, []string{fmt.Sprintf("kafka topic %s: partitions %s have had messages waiting for more than 10s that no member of group %s consumed (see inputs/kafka.md#partitions-no-member-consumes)",
		topic, partitionList(unconsumed), group)}, got.warnings)
	require.Equal(t, float64(len(unconsumed)), testutil.ToFloat64(c.metrics.unconsumed.WithLabelValues(topic)))

	require.Equal(t, []int{0, 1, 2, 3}, receive(t, generations, 30*time.Second), "alone in the group again")
	kafkatest.WaitGroupCommitted(t, brokers, group, topic, 4, 30*time.Second)
	members, err := groupMembers(brokers, group)
	require.NoError(t, err)
	require.Equal(t, []string{"sunset"}, members)
	require.NoError(t, stop())
	accepted := ing.Accepted()
	slices.Sort(accepted)
	slices.Sort(want)
	require.Equal(t, want, accepted)
	require.NoError(t, testutil.GatherAndCompare(reg, strings.NewReader(`
# HELP sunset_kafka_group_rejoins_total Times the consumer left its consumer group and joined again because partitions it does not hold had no consumer, so that the group rebalanced without members that are gone.
# TYPE sunset_kafka_group_rejoins_total counter
sunset_kafka_group_rejoins_total 1
`), "sunset_kafka_group_rejoins_total"))
}

// receive waits for the next value of ch.
func receive[T any](t *testing.T, ch <-chan T, within time.Duration) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(within):
		t.Fatalf("nothing within %s", within)
		panic("unreachable")
	}
}

func assignedIDs(parts []kafkago.PartitionAssignment) []int {
	ids := make([]int, 0, len(parts))
	for _, pa := range parts {
		ids = append(ids, pa.ID)
	}
	slices.Sort(ids)
	return ids
}

// groupMembers is the client IDs of group's members, as its coordinator
// describes them.
func groupMembers(brokers []string, group string) ([]string, error) {
	client := &kafkago.Client{Addr: kafkago.TCP(brokers...), Transport: &kafkago.Transport{}}
	resp, err := client.DescribeGroups(context.Background(), &kafkago.DescribeGroupsRequest{GroupIDs: []string{group}})
	if err != nil {
		return nil, err
	}
	if len(resp.Groups) != 1 {
		return nil, fmt.Errorf("%d groups described", len(resp.Groups))
	}
	if err := resp.Groups[0].Error; err != nil {
		return nil, err
	}
	members := []string{}
	for _, m := range resp.Groups[0].Members {
		members = append(members, m.ClientID)
	}
	slices.Sort(members)
	return members, nil
}

// keepCPUsBusy spins on every CPU until the test ends, so that the broker
// and the consumer run as slowly as on a loaded CI machine.
func keepCPUsBusy(t *testing.T) {
	var stop atomic.Bool
	var wg sync.WaitGroup
	for range runtime.GOMAXPROCS(0) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for !stop.Load() { // spins, on purpose
			}
		}()
	}
	t.Cleanup(func() {
		stop.Store(true)
		wg.Wait()
	})
}
