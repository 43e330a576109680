package config

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// max-inflight-batches-per-credential is from 0 (half) to
// max-inflight-batches.
func TestMaxInFlightBatchesPerCredential(t *testing.T) {
	c := Default()
	require.Zero(t, c.MaxInFlightBatchesPerCredential)
	for _, n := range []int{0, 1, 16} {
		c.MaxInFlightBatchesPerCredential = n
		require.NoError(t, c.Validate(), n)
	}
	for _, n := range []int{-1, 17} {
		c.MaxInFlightBatchesPerCredential = n
		require.EqualError(t, c.Validate(), "max-inflight-batches-per-credential: must be from 0 (half of max-inflight-batches) to max-inflight-batches (16), got "+
			map[int]string{-1: "-1", 17: "17"}[n])
	}
}
