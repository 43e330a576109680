package config

import (
	"errors"
	"time"

	sunsetv1 "github.com/kube-sunset/sunset/api/v1"
	"github.com/kube-sunset/sunset/gate"
	"github.com/kube-sunset/sunset/gate/capihook"
)

// GateConfig is the gate key: the upgrade gate, an admission webhook and
// a Cluster API runtime extension on the listen address (see gate.md).
type GateConfig struct {
	Enabled     bool              `mapstructure:"enabled"`
	Kinds       []gate.Kind       `mapstructure:"kinds"`
	Clusters    map[string]string `mapstructure:"clusters"`
	StaleAfter  time.Duration     `mapstructure:"staleAfter"`
	WhenUnknown string            `mapstructure:"whenUnknown"`
	CleanFor    time.Duration     `mapstructure:"cleanFor"`
	Since       time.Duration     `mapstructure:"since"`
	RetryAfter  time.Duration     `mapstructure:"retryAfter"`
}

// defaultGate is the gate key's defaults.
func defaultGate() GateConfig {
	return GateConfig{StaleAfter: 2 * time.Hour, WhenUnknown: string(gate.Allow), Since: sunsetv1.DefaultCheckSince,
		RetryAfter: capihook.DefaultRetryAfter}
}

// Validate reports what is wrong with the gate key, when the gate is on;
// its window may reach back as far as the retention keeps counts.
func (g GateConfig) Validate(retention time.Duration) error {
	if !g.Enabled {
		return nil
	}
	var errs []error
	bad := badFunc(&errs)
	if _, err := gate.NewKinds(g.Kinds); err != nil {
		bad("gate.kinds", "%v", err)
	}
	if w := gate.WhenUnknown(g.WhenUnknown); w != gate.Allow && w != gate.Refuse {
		bad("gate.whenUnknown", "%q is neither allow nor refuse", g.WhenUnknown)
	}
	if g.StaleAfter < time.Minute {
		bad("gate.staleAfter", "%s is shorter than 1m; Sunset notes what it hears of a cluster each minute", g.StaleAfter)
	}
	if g.Since < time.Hour || (retention > 0 && g.Since > retention) {
		bad("gate.since", "%s is not between 1h and the retention (%s)", g.Since, retention)
	}
	if g.CleanFor < 0 || g.CleanFor > g.Since {
		bad("gate.cleanFor", "%s is not between 0 and gate.since (%s)", g.CleanFor, g.Since)
	}
	if g.RetryAfter < time.Second {
		bad("gate.retryAfter", "%s is shorter than 1s", g.RetryAfter)
	}
	return errors.Join(errs...)
}
