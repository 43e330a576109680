// Package cli is the layer behind the sunset commands. It turns
// APIRequestCounts into what administrators read before an upgrade:
// kubectl-style tables, a per-API breakdown, the verdict of the upgrade
// gate (`sunset check`, decided by verdict.Check) as text, and what to say
// when a window is empty.
//
// Each read command is a Request (ListRequest, CheckRequest,
// WebhooksRequest): Validate checks every flag at once, Run reads through
// a Reader and prints. It works on API objects only, so it renders the
// same whether they came from a running server or from a data directory.
package cli

import (
	"fmt"
	"io"
	"time"

	sunsetv1 "github.com/kube-sunset/sunset/api/v1"
)

// A Request is one read command: `sunset report`, `sunset check` or
// `sunset report webhooks`. Validate checks every flag at once, before any
// server or data directory is opened; Run reads and prints.
type Request interface {
	Validate() error
	Run(r Reader, out Output) error
}

// Reader reads what the API serves: a running server through its client,
// or a data directory through app's Parts. The commands read through it,
// so they print the same from either. It is declared here, where it is
// read, so that the CLI needs the API's types and not the server that
// implements it for a data directory.
type Reader interface {
	List(sunsetv1.Query) (sunsetv1.APIRequestCountList, error)
	Get(string, sunsetv1.Query) (sunsetv1.APIRequestCount, error)
	Info() (sunsetv1.ServerInfo, error)
	Webhooks(sunsetv1.WebhookQuery) (sunsetv1.WebhookCountList, error)
	Webhook(string, sunsetv1.WebhookQuery) (sunsetv1.WebhookCount, error)
}

// Output is where a request prints: its result to Out, notes and hints to
// Err. Now is the clock that ages what it shows.
type Output struct {
	Out, Err io.Writer
	Now      func() time.Time
}

// ExitCodeError ends a command with Code. What went wrong has been printed
// already.
type ExitCodeError struct {
	Code int
	Err  error
}

func (e *ExitCodeError) Error() string { return e.Err.Error() }
func (e *ExitCodeError) Unwrap() error { return e.Err }

// Filters are the flags report and check share.
type Filters struct {
	Cluster, User string
	Since         time.Duration
	ExcludeSystem bool
}

// validateSince accepts whole hours from 1h: counts are hourly, so a
// window of 90m would read as 2h and be named as neither.
func validateSince(since time.Duration) error { return validateHours("--since", since) }

// validateHours accepts whole hours from 1h for the duration flag named.
func validateHours(flag string, d time.Duration) error {
	switch {
	case d < time.Hour:
		return fmt.Errorf("%s %s is shorter than 1h; counts are hourly", flag, d)
	case d%time.Hour != 0:
		whole := d.Truncate(time.Hour)
		return fmt.Errorf("%s %s is not whole hours; counts are hourly (%s or %s)", flag, FormatDuration(d), FormatDuration(whole), FormatDuration(whole+time.Hour))
	}
	return nil
}

func (f Filters) query() sunsetv1.Query {
	q := sunsetv1.DefaultQuery()
	q.Cluster, q.User, q.Since = f.Cluster, f.User, f.Since
	// Enough users that the top non-system ones are known even when
	// system identities lead.
	q.Users = sunsetv1.MaxUsersToReport
	return q
}

func (f Filters) options() reportOptions {
	return reportOptions{ExcludeSystem: f.ExcludeSystem, Since: f.Since}
}

// noRequests explains an empty window with what r holds within its
// retention, read through the same API with the same filters.
func (f Filters) noRequests(r Reader, q sunsetv1.Query, window sunsetv1.APIRequestCountList) (string, bool) {
	var retained *sunsetv1.APIRequestCountList
	var retention time.Duration
	// A server too old to describe itself gets no hint.
	if info, err := r.Info(); err == nil {
		if retention, err = time.ParseDuration(info.Retention); err == nil && retention > q.Since {
			q.Since = retention
			if list, err := r.List(q); err == nil {
				retained = &list
			}
		}
	}
	return emptyWindow(window, retained, retention, f.options())
}
