package backoff

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"
)

func TestDoublesUpToMaxAndResets(t *testing.T) {
	b := New(time.Second, 30*time.Second)
	var got []time.Duration
	for range 7 {
		p := b.Peek()
		require.Equal(t, p, b.Peek(), "Peek takes nothing")
		require.Equal(t, p, b.Next())
		got = append(got, p)
	}
	require.Equal(t, []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second, 16 * time.Second, 30 * time.Second, 30 * time.Second}, got)
	b.Reset()
	require.Equal(t, time.Second, b.Next())
	require.Equal(t, 2*time.Second, b.Peek())
}

func TestWait(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := New(time.Second, 30*time.Second)
		start := time.Now()
		require.True(t, b.Wait(context.Background()))
		require.True(t, b.Wait(context.Background()))
		require.Equal(t, 3*time.Second, time.Since(start), "1s, then 2s")

		ctx, cancel := context.WithCancel(context.Background())
		time.AfterFunc(time.Second, cancel)
		start = time.Now()
		require.False(t, b.Wait(ctx), "a done context ends the 4s pause")
		require.Equal(t, time.Second, time.Since(start))
		require.False(t, b.Wait(ctx), "and the next at once")
		require.Equal(t, time.Second, time.Since(start))
	})
}
