package eks

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestCheckpointRoundTrip(t *testing.T) {
	t.Parallel()
	c := freshCheckpoint(1_795_707_382_358)
	for i := range 100 {
		// Times around the watermark, some after it (a clock ahead of
		// Sunset's).
		c.seen[eventKey(streamA, fmt.Sprint(i))] = c.watermark - int64(i*997) + 50
	}
	raw := c.encode()
	require.Equal(t, raw, c.encode(), "the same events encode the same")
	require.Less(t, len(raw), 1+10+2+100*(3+8), "about 11 bytes an event")
	got, err := decodeCheckpoint(raw)
	require.NoError(t, err)
	require.Equal(t, c, got)

	empty, err := decodeCheckpoint(freshCheckpoint(0).encode())
	require.NoError(t, err)
	require.Equal(t, freshCheckpoint(0), empty)
}

// Every cut, and any other version, is refused rather than read as fewer
// events.
func TestCheckpointRefusesCorruptBytes(t *testing.T) {
	t.Parallel()
	c := freshCheckpoint(1_795_707_382_358)
	for i := range 10 {
		c.seen[eventKey(streamB, fmt.Sprint(i))] = c.watermark - int64(i)
	}
	raw := c.encode()
	for n := range len(raw) {
		_, err := decodeCheckpoint(raw[:n])
		require.ErrorIs(t, err, errCorrupt, "cut to %d bytes", n)
	}
	_, err := decodeCheckpoint(append(raw, 0))
	require.ErrorIs(t, err, errCorrupt)
	other := append([]byte{2}, raw[1:]...)
	_, err = decodeCheckpoint(other)
	require.ErrorIs(t, err, errCorrupt)
	// A count that claims more events than the bytes hold.
	_, err = decodeCheckpoint([]byte{checkpointVersion, 0, 0xff, 0xff, 0xff, 0xff, 0x0f})
	require.ErrorIs(t, err, errCorrupt)
}

// prune forgets what the next poll cannot return, then the oldest past
// the bound.
func TestCheckpointPrune(t *testing.T) {
	t.Parallel()
	c := freshCheckpoint(10_000)
	for i := range 10 {
		c.seen[uint64(i)] = int64(8_000 + i*400) // 8000 ... 11600
	}
	c.prune(1_000, 100)
	require.Len(t, c.seen, 7, "before 9000 forgotten")
	for k, ts := range c.seen {
		require.GreaterOrEqual(t, ts, int64(9_000), k)
	}
	c.prune(1_000, 3)
	require.Equal(t, map[uint64]int64{7: 10_800, 8: 11_200, 9: 11_600}, c.seen, "the newest kept")
	require.Equal(t, int64(0), freshCheckpoint(500).from(1_000), "never before 1970")
}

// Keys tell streams apart: moto numbers events per server, and another
// implementation might per stream.
func TestEventKeyIncludesTheStream(t *testing.T) {
	t.Parallel()
	require.NotEqual(t, eventKey(streamA, "1"), eventKey(streamB, "1"))
	require.NotEqual(t, eventKey("a", "b1"), eventKey("ab", "1"))
}
