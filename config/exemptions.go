package config

import (
	"errors"
	"fmt"
	"strings"
	"time"

	sunsetv1 "github.com/kube-sunset/sunset/api/v1"
)

// ExemptionConfig is one entry of exemptions: calls to API by User and/or
// UserAgent (a trailing * matches a prefix) are accepted until Expires.
type ExemptionConfig struct {
	API       string `mapstructure:"api" json:"api"`
	User      string `mapstructure:"user" json:"user,omitempty"`
	UserAgent string `mapstructure:"userAgent" json:"userAgent,omitempty"`
	Reason    string `mapstructure:"reason" json:"reason"`
	// Expires is an RFC 3339 time, or a date, which means 00:00 UTC of it.
	Expires string `mapstructure:"expires" json:"expires"`
}

// maxExemptions bounds a list, from the file or a ConfigMap.
const maxExemptions = 1000

// ParseExemptions checks every entry and returns them as the verdict
// takes them; every problem at once, each named by its index.
func ParseExemptions(in []ExemptionConfig) ([]sunsetv1.Exemption, error) {
	if len(in) > maxExemptions {
		return nil, fmt.Errorf("%d exemptions, more than %d", len(in), maxExemptions)
	}
	var errs []error
	out := make([]sunsetv1.Exemption, 0, len(in))
	for i, e := range in {
		bad := func(format string, args ...any) {
			errs = append(errs, fmt.Errorf("[%d]: %s", i, fmt.Sprintf(format, args...)))
		}
		if e.API == "" || strings.Count(e.API, ".") < 1 {
			bad("api %q is not an APIRequestCount name such as cronjobs.v1beta1.batch", e.API)
		}
		if strings.TrimSpace(e.Reason) == "" {
			bad("reason is required: say why the calls may go on, and who fixes them")
		}
		expires, err := parseExpires(e.Expires)
		if err != nil {
			bad("%v", err)
		}
		out = append(out, sunsetv1.Exemption{API: e.API, UserName: e.User, UserAgent: e.UserAgent, Reason: e.Reason, Expires: expires})
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return out, nil
}

func parseExpires(s string) (time.Time, error) {
	if s == "" {
		return time.Time{}, errors.New("expires is required: an RFC 3339 date (2026-12-31) or time (2026-12-31T18:00:00Z)")
	}
	if t, err := time.Parse(time.RFC3339, s); err == nil {
		return t.UTC(), nil
	}
	if t, err := time.Parse(time.DateOnly, s); err == nil {
		return t, nil
	}
	return time.Time{}, fmt.Errorf("expires %q is not an RFC 3339 date (2026-12-31) or time (2026-12-31T18:00:00Z)", s)
}
