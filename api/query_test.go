package api

import (
	"net/url"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// since is whole hours from 1h: counts are hourly, so 90m is refused
// rather than read as 2h.
func TestSinceIsWholeHours(t *testing.T) {
	for since, want := range map[string]string{
		"90m":  `since "90m" is not whole hours; counts are hourly (1h or 2h)`,
		"2h1s": `since "2h1s" is not whole hours; counts are hourly (2h or 3h)`,
		"30m":  `since "30m" is not a duration of at least 1h, such as 24h or 168h`,
	} {
		_, err := ParseQuery(url.Values{"since": {since}}, getParams, 0)
		require.EqualError(t, err, want, since)
	}
	q, err := ParseQuery(url.Values{"since": {"120m"}}, getParams, 0)
	require.NoError(t, err)
	require.Equal(t, 2*time.Hour, q.Since)
}
