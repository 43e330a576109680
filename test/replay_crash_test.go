package test

import (
	"bytes"
	"os/exec"
	"regexp"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kube-sunset/sunset/internal/testutil/auditgen"
)

var replaySummary = regexp.MustCompile(`Replayed (\d+) events .*: (\d+) counted, (\d+) duplicates`)

// replayed runs `sunset replay` of log into dataDir and returns what its
// summary says it counted and found counted before.
func replayed(t *testing.T, dataDir string, log []byte) (counted, duplicates int) {
	t.Helper()
	cmd := exec.Command(sunsetBin, "replay", "--data-dir", dataDir, "--node", "n1", "-")
	cmd.Stdin = bytes.NewReader(log)
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", out)
	m := replaySummary.FindSubmatch(out)
	require.NotNil(t, m, "no summary in:\n%s", out)
	counted, _ = strconv.Atoi(string(m[2]))
	duplicates, _ = strconv.Atoi(string(m[3]))
	return counted, duplicates
}

// storedEndpoints is what the data directory holds for endpoints.v1, read
// by a server started on it and stopped again.
func storedEndpoints(t *testing.T, dataDir string) int64 {
	t.Helper()
	p := startBinary(t, dataDir)
	n := counts(t, p.url)["endpoints.v1"]
	require.NoError(t, p.cmd.Process.Kill())
	<-p.exited
	return n
}

// A replay is killed with SIGKILL half-way through a file, then the same
// file is replayed in full, twice: the first full replay counts exactly
// what the killed one had not committed, the second nothing, and the
// store holds every deprecated line of the file once.
func TestReplayAfterSIGKILLCountsEachLineOnce(t *testing.T) {
	if testing.Short() {
		t.Skip("starts the binary")
	}
	const lines = 40000
	gen := auditgen.Options{Prefix: "killed-replay", DeprecatedEvery: 2, At: time.Now().UTC().Add(-time.Hour)}
	deprecated := gen.CountDeprecated(0, lines)
	require.Equal(t, 20000, deprecated)
	var log []byte
	for i := range lines {
		log = append(gen.Append(log, i), '\n')
	}
	dir := t.TempDir()

	cmd := exec.Command(sunsetBin, "replay", "--data-dir", dir, "--node", "n1", "-")
	stdin, err := cmd.StdinPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	// The write returns once the replay has read all but what the pipe
	// and its batches in flight hold: it is committing the first half.
	_, err = stdin.Write(log[:len(log)/2])
	require.NoError(t, err)
	require.NoError(t, cmd.Process.Signal(syscall.SIGKILL))
	require.Error(t, cmd.Wait())

	before := storedEndpoints(t, dir)
	t.Logf("the killed replay committed %d of %d deprecated lines", before, deprecated)
	require.True(t, before > 0 && before < int64(deprecated), "the kill came mid-way: %d of %d counted", before, deprecated)

	counted, duplicates := replayed(t, dir, log)
	require.Equal(t, deprecated-int(before), counted)
	require.Equal(t, int(before), duplicates)
	counted, duplicates = replayed(t, dir, log)
	require.Equal(t, 0, counted, "nothing new the second time")
	require.Equal(t, deprecated, duplicates)
	require.Equal(t, int64(deprecated), storedEndpoints(t, dir))
}
