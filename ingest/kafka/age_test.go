package kafka

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/rs/zerolog"
	"github.com/stretchr/testify/require"

	"github.com/kube-sunset/sunset/internal/testutil/ingesttest"
	"github.com/kube-sunset/sunset/internal/testutil/kafkatest"
)

// sunset_kafka_lag_seconds is the age of the newest message committed
// from each topic, by the time stamped on it; a topic that brought
// nothing counts from the start.
func TestLagSecondsIsTheNewestMessagesAge(t *testing.T) {
	brokers := kafkatest.Brokers(t)
	busy := kafkatest.Topic(t, brokers, "age", 1)
	quiet := kafkatest.Topic(t, brokers, "quiet", 1)
	msgs, _ := events("age", 3)
	stamped := time.Now().Add(-time.Hour).Truncate(time.Millisecond)
	for i := range msgs {
		msgs[i].Time = stamped.Add(-time.Duration(len(msgs)-1-i) * time.Minute)
	}
	kafkatest.Produce(t, brokers, busy, 0, msgs...)

	started := time.Now()
	reg := prometheus.NewRegistry()
	group := "age-" + busy
	c, err := New(Options{Config: Config{Brokers: brokers, Topics: []string{busy, quiet}, GroupID: group, SessionTimeout: 2 * time.Second},
		DefaultCluster: "c", Ingester: &ingesttest.Flaky{}, Cursors: &ingesttest.Flaky{}, Logger: zerolog.Nop(), Registerer: reg})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	kafkatest.WaitGroupCommitted(t, brokers, group, busy, 1, 30*time.Second)
	cancel()
	require.NoError(t, <-done)

	gauge := func(topic string) float64 {
		families, err := reg.Gather()
		require.NoError(t, err)
		for _, f := range families {
			for _, m := range f.GetMetric() {
				if f.GetName() == "sunset_kafka_lag_seconds" && m.GetLabel()[0].GetValue() == topic {
					return m.GetGauge().GetValue()
				}
			}
		}
		t.Fatalf("no sunset_kafka_lag_seconds for %s", topic)
		return 0
	}
	elapsed := time.Since(started).Seconds()
	busyAge, quietAge := gauge(busy), gauge(quiet)
	require.GreaterOrEqual(t, busyAge, time.Hour.Seconds(), "the newest of the three, stamped an hour ago")
	require.Less(t, busyAge, time.Hour.Seconds()+elapsed+1)
	require.GreaterOrEqual(t, quietAge, elapsed-1, "the quiet topic counts from the start")
	require.Less(t, quietAge, elapsed+1)
	require.Equal(t, 2, testutil.CollectAndCount(reg, "sunset_kafka_lag_seconds"))
}
