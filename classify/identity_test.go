package classify

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// sourceIPs leaves out values too long to be an address, the real one
// included: it is still a sender's string.
func TestSourceIPsLeaveOutValuesNoAddressHas(t *testing.T) {
	require.Equal(t, []string{"10.0.0.1"}, sourceIPs([]string{"10.0.0.1", strings.Repeat("9", 65)}))
	require.Equal(t, []string{"10.0.0.2", "10.0.0.1"}, sourceIPs([]string{"10.0.0.1", strings.Repeat("9", 65), "10.0.0.2"}))
	require.Nil(t, sourceIPs(nil))
}

func TestRequestIDIsBoundedAndUnambiguous(t *testing.T) {
	at := time.Date(2026, 11, 21, 19, 18, 3, 123456000, time.UTC)
	require.Equal(t, "1795288683123456000/a1", RequestID("a1", at))
	require.Equal(t, "/a1", RequestID("a1", time.Time{}))
	// The time's digits never run into the ID.
	require.NotEqual(t, RequestID("1/a", time.Time{}), RequestID("a", time.Unix(0, 1)))
	long := RequestID(strings.Repeat("A", 70000), at)
	require.Len(t, long, len("sha256:")+64)
	require.NotEqual(t, long, RequestID(strings.Repeat("A", 69999), at))
	require.Equal(t, long, RequestID(strings.Repeat("A", 70000), at))
}

// Only a time a replay's shift can have kept names a request: one after
// its received time, off by part of an hour, or before 1970 (where
// UnixNano wraps) is a sender's invention, and the received time is used.
func TestIdentityTimeOnlyFromAShift(t *testing.T) {
	received := time.Date(2026, 11, 23, 13, 18, 3, 123456000, time.UTC)
	for _, tc := range []struct {
		name     string
		original time.Time
		want     time.Time
	}{
		{"none", time.Time{}, received},
		{"shifted 43h", received.Add(-43 * time.Hour), received.Add(-43 * time.Hour)},
		{"not shifted", received, received},
		{"later than received", received.Add(time.Hour), received},
		{"part of an hour", received.Add(-90 * time.Minute), received},
		{"before 1970", time.Date(1600, 1, 1, 0, 0, 0, 0, time.UTC), received},
	} {
		e := Event{ID: "a1", RequestReceived: received, IdentityTime: tc.original}
		require.Equal(t, RequestID("a1", tc.want), e.identity(), tc.name)
	}
}
