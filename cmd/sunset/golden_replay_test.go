package main

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kube-sunset/sunset/internal/testutil/auditcount"
)

// replayTable checks a replay dry run's table: a row per API, hour, node,
// client and verb, with the requests that would count.
func replayTable(t *testing.T, c *auditcount.Counter, out string) {
	t.Helper()
	var sum int64
	for _, row := range table(t, out, nil) {
		n := number(t, row["WOULD COUNT"])
		agent := row["USER AGENT"]
		if agent == "-" {
			agent = ""
		}
		require.Equal(t, c.Count(func(r request) bool {
			return r.API == row["API"] && r.Hour.Format(time.RFC3339) == row["HOUR"] && r.Node == row["NODE"] && r.Username == row["USER"] &&
				r.UserAgent == agent && r.Verb == row["VERB"]
		}), n, row)
		sum += n
	}
	require.Equal(t, c.Count(nil), sum, "every request is in a row")
}
