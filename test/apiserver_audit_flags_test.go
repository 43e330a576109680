package test

import (
	"fmt"
	"slices"
	"strconv"
	"time"
)

func oneOf(values ...string) func(string) error {
	return func(s string) error {
		if !slices.Contains(values, s) {
			return fmt.Errorf("%q is not one of %v", s, values)
		}
		return nil
	}
}

// positive checks that a flag's value parses and is above zero.
func positive[T int | float64 | time.Duration](parse func(string) (T, error)) func(string) error {
	return func(s string) error {
		v, err := parse(s)
		if err == nil && v <= 0 {
			err = fmt.Errorf("%v is not positive", v)
		}
		return err
	}
}

// kube-apiserver's audit webhook flags (k8s.io/apiserver
// pkg/server/options/audit.go) and how to check their values.
var apiserverAuditFlags = map[string]func(string) error{
	"audit-policy-file":                     absPath,
	"audit-webhook-config-file":             absPath,
	"audit-webhook-version":                 oneOf("audit.k8s.io/v1"),
	"audit-webhook-mode":                    oneOf("batch", "blocking", "blocking-strict"),
	"audit-webhook-batch-max-size":          positiveInt,
	"audit-webhook-batch-max-wait":          positiveDuration,
	"audit-webhook-batch-throttle-qps":      positiveFloat,
	"audit-webhook-batch-throttle-burst":    positiveInt,
	"audit-webhook-batch-buffer-size":       positiveInt,
	"audit-webhook-initial-backoff":         positiveDuration,
	"audit-webhook-truncate-enabled":        oneOf("true"),
	"audit-webhook-truncate-max-batch-size": positiveInt,
	"audit-webhook-truncate-max-event-size": positiveInt,
}

var (
	positiveInt      = positive(strconv.Atoi)
	positiveDuration = positive(time.ParseDuration)
	positiveFloat    = positive(func(s string) (float64, error) { return strconv.ParseFloat(s, 32) })
)
