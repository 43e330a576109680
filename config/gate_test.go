package config_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kube-sunset/sunset/config"
	"github.com/kube-sunset/sunset/gate"
)

// The gate's keys are checked when it is on, each naming its key.
func TestGateConfigErrors(t *testing.T) {
	cfg := config.Default()
	cfg.Gate.Enabled = true
	cfg.Gate.Kinds = []gate.Kind{{Group: "infrastructure.example.com", Kind: "ManagedControlPlane"}}
	cfg.Gate.WhenUnknown = "deny"
	cfg.Gate.StaleAfter = time.Second
	cfg.Gate.Since = 30 * time.Minute
	cfg.Gate.CleanFor = time.Hour
	cfg.Gate.RetryAfter = time.Millisecond
	require.EqualError(t, cfg.Validate(), `gate.kinds: entry 0: ManagedControlPlane: path is empty: name the version field, such as spec.version
gate.whenUnknown: "deny" is neither allow nor refuse
gate.staleAfter: 1s is shorter than 1m; Sunset notes what it hears of a cluster each minute
gate.since: 30m0s is not between 1h and the retention (720h0m0s)
gate.cleanFor: 1h0m0s is not between 0 and gate.since (30m0s)
gate.retryAfter: 1ms is shorter than 1s`)
	cfg.Gate.Enabled = false
	require.NoError(t, cfg.Validate())
}
