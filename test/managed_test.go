package test

import (
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kube-sunset/sunset/internal/testutil/cloudwatchtest"
	"github.com/kube-sunset/sunset/internal/testutil/pubsubtest"
	"github.com/kube-sunset/sunset/internal/testutil/testserver"
)

// managedFeed is n audit events, IDs prefix-first on, a tenth deprecated, from
// five users, a second apart starting at start; want gains the deprecated
// ones by user.
func managedFeed(prefix string, first, n int, start time.Time, want map[string]int64) []cloudwatchtest.Event {
	var out []cloudwatchtest.Event
	for i := first; i < first+n; i++ {
		at := start.Add(time.Duration(i) * 100 * time.Millisecond)
		deprecated := i%10 == 0
		if deprecated {
			want[fmt.Sprintf("user-%d", i%5)]++
		}
		out = append(out, cloudwatchtest.Event{Time: at, Message: string(kafkaEvent(fmt.Sprintf("%s-%d", prefix, i), i%5, deprecated, at))})
	}
	return out
}

// requireUserCounts waits until the server counts want by user, and
// requires the feed's deprecated requests, deprecated of them, to be all
// that want holds.
func requireUserCounts(t *testing.T, p *process, want map[string]int64, within time.Duration, deprecated int) {
	t.Helper()
	var got map[string]int64
	err := p.await(within, testserver.RecheckGap, func() bool {
		got = userCounts(t, p.url)
		return fmt.Sprint(got) == fmt.Sprint(want)
	})
	require.Equal(t, want, got, "%v", err)
	var sum int64
	for _, n := range want {
		sum += n
	}
	require.Equal(t, int64(deprecated), sum, "a tenth of the events are deprecated")
}

// An EKS cluster's audit log in CloudWatch Logs, read by the binary with
// the SDK's default credential chain (credentials, Region and endpoint
// from the environment, as IRSA would give them), is counted exactly
// through five SIGKILLs while it reads: pages of 50 events, and each kill
// after a different number of page commits, so that most land between the
// pages of one poll. Two apiservers' streams, the second delivered 20
// minutes behind the first (twenty overlaps), each read from its own
// position. A stream of another prefix in the group is passed over.
func TestEKSExactAcrossKills(t *testing.T) {
	if testing.Short() {
		t.Skip("starts the binary and moto_server")
	}
	moto := cloudwatchtest.Start(t)
	group := "/aws/eks/prod/cluster"
	cfg := filepath.Join(t.TempDir(), "sunset.yaml")
	require.NoError(t, os.WriteFile(cfg, []byte(`ingest:
  eks:
    - cluster: prod
      pollInterval: 1s
      overlap: 1m
      startFrom: 2h
      pageSize: 50
`), 0o600))
	dataDir := t.TempDir()
	start := time.Now().UTC().Add(-50 * time.Minute).Truncate(time.Second)
	want := map[string]int64{}
	ignored := map[string]int64{}
	moto.Put(t, group, "authenticator-abc", managedFeed("authenticator", 0, 200, start, ignored))

	const rounds, perRound = 6, 600
	for round := range rounds {
		moto.Put(t, group, cloudwatchtest.Stream("aaa"), managedFeed("eks", round*perRound, perRound, start, want))
		// The second apiserver's events of the same minute arrive with
		// the first's, and are 20 minutes older.
		moto.Put(t, group, cloudwatchtest.Stream("bbb"), managedFeed("eks-late", round*perRound, perRound, start.Add(-20*time.Minute), want))
		if round == rounds-1 {
			break
		}
		p := startBinaryEnv(t, moto.Env(), dataDir, "--config", cfg, "--log-level", "debug")
		p.waitCount(t, "page committed", 1+round*3, 60*time.Second)
		require.NoError(t, p.cmd.Process.Signal(syscall.SIGKILL))
		<-p.exited
	}
	p := startBinaryEnv(t, moto.Env(), dataDir, "--config", cfg, "--log-level", "debug")
	requireUserCounts(t, p, want, 90*time.Second, 2*rounds*perRound/10)
}

// A GKE cluster's audit log, routed to Pub/Sub as LogEntries, is read by
// the binary from the emulator PUBSUB_EMULATOR_HOST names and counted
// exactly through five SIGKILLs while it reads, each after a commit:
// messages in flight at a kill are delivered again once their ack deadline
// passes, and count once. Every message is acknowledged in the end.
func TestGKEExactAcrossKills(t *testing.T) {
	if testing.Short() {
		t.Skip("starts the binary")
	}
	ps := pubsubtest.Start(t)
	env := []string{"PUBSUB_EMULATOR_HOST=" + ps.Fake.Addr}
	cfg := filepath.Join(t.TempDir(), "sunset.yaml")
	require.NoError(t, os.WriteFile(cfg, []byte(`ingest:
  gke:
    - cluster: prod
      subscription: `+ps.Subscription+`
`), 0o600))
	dataDir := t.TempDir()
	start := time.Now().UTC().Add(-50 * time.Minute).Truncate(time.Second)
	want := map[string]int64{}

	const rounds, perRound = 6, 400
	var ids []string
	for round := range rounds {
		var entries [][]byte
		for _, e := range managedFeed("gke", round*perRound, perRound, start, want) {
			entry, err := pubsubtest.LogEntry([]byte(e.Message))
			require.NoError(t, err)
			entries = append(entries, entry)
		}
		ids = append(ids, ps.Publish(t, entries...)...)
		if round == rounds-1 {
			break
		}
		p := startBinaryEnv(t, env, dataDir, "--config", cfg, "--log-level", "debug")
		p.waitCount(t, "committed", 1, 60*time.Second)
		require.NoError(t, p.cmd.Process.Signal(syscall.SIGKILL))
		<-p.exited
	}
	p := startBinaryEnv(t, env, dataDir, "--config", cfg, "--log-level", "debug")
	ps.AwaitAcked(t, ids...)
	requireUserCounts(t, p, want, 30*time.Second, rounds*perRound/10)
}
