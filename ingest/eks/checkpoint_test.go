package eks

import (
	"encoding/binary"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
)

// sample is a checkpoint of two streams, one far behind the other, with
// events around their watermarks (some after: a clock ahead of Sunset's).
func sample() *checkpoint {
	c := freshCheckpoint(1_795_707_000_000)
	a := c.stream(streamA, 300_000)
	a.watermark, a.sweptFrom, a.sweptAt, a.ingested, a.forgot = 1_795_707_382_358, 1_795_707_300_000, 1_795_707_390_000, 1_795_707_391_000, 1_795_706_000_000
	b := c.stream(streamB, 300_000)
	b.watermark = 1_795_706_100_000 // 20 minutes behind
	for i := range 100 {
		a.seen[eventKey(streamA, fmt.Sprint(i))] = a.watermark - int64(i*997) + 50
		b.seen[eventKey(streamB, fmt.Sprint(i))] = b.watermark - int64(i*13)
	}
	return c
}

func TestCheckpointRoundTrip(t *testing.T) {
	t.Parallel()
	c := sample()
	raw := c.encode()
	require.Equal(t, raw, c.encode(), "the same events encode the same")
	require.Less(t, len(raw), 1+10+1+2*(1+len(streamA)+6*10+2)+200*(3+8), "about 11 bytes an event")
	got, err := decodeCheckpoint(raw)
	require.NoError(t, err)
	require.Equal(t, c, got)

	empty, err := decodeCheckpoint(freshCheckpoint(0).encode())
	require.NoError(t, err)
	require.Equal(t, freshCheckpoint(0), empty)
}

// encodeV1 writes a checkpoint as version 1 did: one watermark for the
// group, and the events read since the overlap before it.
func encodeV1(watermark int64, seen map[uint64]int64) []byte {
	b := []byte{checkpointV1}
	b = binary.AppendVarint(b, watermark)
	return appendEvents(b, watermark, seen)
}

// A version-1 checkpoint's single watermark becomes every stream's
// starting point, read from the overlap before it as version 1 would
// have; the events it had read stay known until every stream has read
// past them.
func TestCheckpointMigratesVersion1(t *testing.T) {
	t.Parallel()
	const watermark, overlap = 1_795_707_382_358, 300_000
	old := map[uint64]int64{eventKey(streamA, "1"): watermark - 1_000, eventKey(streamB, "7"): watermark - 200_000}
	c, err := decodeCheckpoint(encodeV1(watermark, old))
	require.NoError(t, err)
	require.Equal(t, &checkpoint{start: watermark, streams: map[string]*streamState{}, legacy: old}, c)

	for _, name := range []string{streamA, streamB} {
		st := c.stream(name, overlap)
		require.Equal(t, &streamState{watermark: watermark, sweptFrom: watermark, floor: watermark - overlap, seen: map[uint64]int64{}}, st)
		require.Equal(t, int64(watermark-overlap), st.sweepFrom(overlap), "read from where version 1 would have")
		require.Equal(t, int64(watermark-overlap), st.lateBefore(overlap), "nothing it reads is late")
	}
	require.True(t, c.known(c.streams[streamB], eventKey(streamB, "7")))
	require.False(t, c.known(c.streams[streamB], eventKey(streamB, "8")))

	// Once both streams have swept past the old events, they are gone.
	for _, st := range c.streams {
		st.sweptFrom = watermark + 2*overlap
		st.sweptAt = 1
	}
	c.prune(overlap, maxSeen)
	require.Nil(t, c.legacy)

	got, err := decodeCheckpoint(c.encode())
	require.NoError(t, err)
	require.Equal(t, c, got, "a migrated checkpoint is written as version 2")
}

// Every cut, and any other version, is refused rather than read as fewer
// events or streams.
func TestCheckpointRefusesCorruptBytes(t *testing.T) {
	t.Parallel()
	c := sample()
	c.legacy = map[uint64]int64{1: c.start - 5}
	for _, raw := range [][]byte{c.encode(), encodeV1(1_795_707_382_358, map[uint64]int64{1: 1, 2: 2})} {
		for n := range len(raw) {
			_, err := decodeCheckpoint(raw[:n])
			require.ErrorIs(t, err, errCorrupt, "cut to %d bytes", n)
		}
		_, err := decodeCheckpoint(append(raw, 0))
		require.ErrorIs(t, err, errCorrupt)
		other := append([]byte{3}, raw[1:]...)
		_, err = decodeCheckpoint(other)
		require.ErrorIs(t, err, errCorrupt)
	}
	// A count that claims more events than the bytes hold.
	_, err := decodeCheckpoint([]byte{checkpointVersion, 0, 0xff, 0xff, 0xff, 0xff, 0x0f})
	require.ErrorIs(t, err, errCorrupt)
	// A stream named twice.
	one := freshCheckpoint(0)
	one.stream("s", 0)
	raw := one.encode()
	twice := append(append([]byte{}, raw[:3]...), 2)
	twice = append(append(twice, raw[4:]...), raw[4:]...)
	_, err = decodeCheckpoint(twice)
	require.ErrorIs(t, err, errCorrupt)
}

// prune forgets, stream by stream, what the next sweep cannot return,
// then the oldest past the bound across streams, noting in each stream
// how far it forgot.
func TestCheckpointPrune(t *testing.T) {
	t.Parallel()
	c := freshCheckpoint(0)
	a, b := c.stream("a", 0), c.stream("b", 0)
	a.sweptFrom, a.watermark = 11_000, 12_000
	b.sweptFrom, b.watermark = 5_000, 6_000
	for i := range 10 {
		a.seen[uint64(i)] = int64(8_000 + i*400)     // 8000 ... 11600
		b.seen[uint64(100+i)] = int64(2_000 + i*400) // 2000 ... 5600
	}
	c.prune(1_000, 100)
	require.Len(t, a.seen, 7, "a: before 9000 (two overlaps before its sweep) forgotten")
	require.Len(t, b.seen, 7, "b: before 3000 forgotten; its own window, however far behind a")
	require.Zero(t, a.forgot)
	c.prune(1_000, 5)
	require.Equal(t, map[uint64]int64{5: 10_000, 6: 10_400, 7: 10_800, 8: 11_200, 9: 11_600}, a.seen, "the newest of both streams kept")
	require.Empty(t, b.seen)
	require.Equal(t, int64(9_600), a.forgot)
	require.Equal(t, int64(5_600), b.forgot)
	require.Equal(t, int64(0), freshCheckpoint(500).stream("x", 1_000).sweepFrom(1_000), "never before 1970")
}

// Keys tell streams apart: moto numbers events per server, and another
// implementation might per stream.
func TestEventKeyIncludesTheStream(t *testing.T) {
	t.Parallel()
	require.NotEqual(t, eventKey(streamA, "1"), eventKey(streamB, "1"))
	require.NotEqual(t, eventKey("a", "b1"), eventKey("ab", "1"))
}
