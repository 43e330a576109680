package test

import (
	"fmt"
	"math/rand/v2"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kube-sunset/sunset/internal/testutil/loopback"
)

// Sunset is killed with SIGKILL at least 20 times at random points while
// four apiservers' webhook clients (kube-apiserver's own, in batch mode)
// send it deprecated requests: during badger commits, between them, and as
// it starts. The clients retry what was not acknowledged, as kube-apiserver
// does; in the end every request they sent is counted, exactly once.
func TestSIGKILLsUnderLoad(t *testing.T) {
	if testing.Short() {
		t.Skip("starts the binary")
	}
	seed := uint64(time.Now().UnixNano())
	rng := rand.New(rand.NewPCG(seed, 0))
	t.Logf("seed %d", seed)
	dir := t.TempDir()
	// One port for every restart, so that the restarted server answers
	// where its clients already send.
	port := loopback.FreePort(t)
	args := []string{"--listen", fmt.Sprintf("127.0.0.1:%d", port), "--log-level", "debug"}
	p := startBinary(t, dir, args...)
	finish := loadgen(t, "-mode", "stream", "-url", fmt.Sprintf("http://127.0.0.1:%d/audit/webhook", port),
		"-clients", "4", "-rate", "400", "-prefix", "crash", "-retry", "100ms", "-retry-steps", "15")

	kills, midCommit, atStart := 0, 0, 0
	for kills < 20 || midCommit < 10 {
		require.Less(t, kills, 60, "10 kills during commits within 60")
		switch rng.IntN(4) {
		case 0, 1: // as a commit starts, a few commits on
			p.waitCount(t, "commit started", 1+rng.IntN(4), 30*time.Second)
		case 2: // as one has finished
			p.waitCount(t, "commit finished", 1+rng.IntN(4), 30*time.Second)
		case 3: // as soon as it serves
			atStart++
		}
		require.NoError(t, p.cmd.Process.Signal(syscall.SIGKILL))
		<-p.exited
		<-p.logDone
		kills++
		if p.logged.lastCommit == "commit started" {
			midCommit++
		}
		p = startBinary(t, dir, args...)
	}
	sum := finish()
	require.Equal(t, loadSummary{Sent: sum.Sent, Acked: sum.Sent}, sum, "every batch was acknowledged in the end, none given up")
	got := counts(t, p.url)
	t.Logf("%d SIGKILLs: %d during a commit, %d as the server started; %d requests sent", kills, midCommit, atStart, sum.Sent)
	require.Equal(t, map[string]int64{"endpoints.v1": sum.Sent}, got, "nothing lost, nothing counted twice")
}
