package report

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/kube-sunset/sunset/api"
	"github.com/kube-sunset/sunset/catalog"
)

// Exit codes of `sunset check`.
const (
	// ExitSafe: no API removed at or before the target was requested.
	ExitSafe = 0
	// ExitError: the check itself failed (usage, connection, data).
	ExitError = 1
	// ExitDeprecated: only deprecated, not yet removed, APIs were requested,
	// and --warnings-as-errors was given.
	ExitDeprecated = 2
	// ExitRemoved: APIs removed at or before the target were requested.
	ExitRemoved = 3
)

// Severity of a finding.
const (
	SeverityRemoved    = "removed"
	SeverityDeprecated = "deprecated"
)

// CheckOptions configure Check.
type CheckOptions struct {
	Target           catalog.Release
	Since            time.Duration
	ExcludeSystem    bool
	WarningsAsErrors bool
}

// Finding is one API that was requested in the window.
type Finding struct {
	Name     string `json:"name"`
	Severity string `json:"severity"`
	// RemovedIn is the release that removes the API, if known.
	RemovedIn string `json:"removedInRelease,omitempty"`
	// AlreadyRemoved is true when clients already got 404s from it.
	AlreadyRemoved bool   `json:"alreadyRemoved,omitempty"`
	Warning        string `json:"warning"`
	Requests       int64  `json:"requests"`
	ClientCount    int    `json:"clientCount"`
	// Clients are the top usernames, most requests first.
	Clients []string `json:"clients"`
}

// CheckResult is the verdict of the upgrade gate.
type CheckResult struct {
	TargetVersion string    `json:"targetVersion"`
	Since         string    `json:"since"`
	ExcludeSystem bool      `json:"excludeSystem"`
	ExitCode      int       `json:"exitCode"`
	Findings      []Finding `json:"findings"`
}

// Check decides whether upgrading to the target is safe from what list says
// was requested. list must have been read with Since set, so each item has
// a window.
func Check(list api.APIRequestCountList, o CheckOptions) CheckResult {
	res := CheckResult{TargetVersion: o.Target.String(), Since: FormatDuration(o.Since), ExcludeSystem: o.ExcludeSystem, Findings: []Finding{}}
	for _, r := range Rows(list, Options{ExcludeSystem: o.ExcludeSystem, Since: o.Since}) {
		obj := find(list, r.Name)
		f := Finding{Name: r.Name, RemovedIn: r.RemovedIn, AlreadyRemoved: r.Removed, Warning: warning(obj),
			Requests: r.Window, ClientCount: r.WindowClients, Clients: r.WindowUserList, Severity: SeverityDeprecated}
		if f.Clients == nil {
			f.Clients = []string{}
		}
		rem, err := catalog.ParseRelease(r.RemovedIn)
		if r.Removed || (err == nil && !o.Target.Less(rem)) {
			f.Severity = SeverityRemoved
		}
		res.Findings = append(res.Findings, f)
	}
	// Most urgent first: removed, then by removal release, soonest first;
	// APIs with no planned removal last.
	slices.SortStableFunc(res.Findings, func(a, b Finding) int {
		if a.Severity != b.Severity {
			if a.Severity == SeverityRemoved {
				return -1
			}
			return 1
		}
		ra, _ := catalog.ParseRelease(a.RemovedIn)
		rb, _ := catalog.ParseRelease(b.RemovedIn)
		switch {
		case ra == rb:
			return strings.Compare(a.Name, b.Name)
		case ra.IsZero():
			return 1
		case rb.IsZero() || ra.Less(rb):
			return -1
		}
		return 1
	})
	for _, f := range res.Findings {
		if f.Severity == SeverityRemoved {
			res.ExitCode = ExitRemoved
		}
	}
	if res.ExitCode == ExitSafe && o.WarningsAsErrors && len(res.Findings) > 0 {
		res.ExitCode = ExitDeprecated
	}
	return res
}

func find(list api.APIRequestCountList, name string) api.APIRequestCount {
	for _, it := range list.Items {
		if it.Metadata.Name == name {
			return it
		}
	}
	return api.APIRequestCount{}
}

// warning is the catalog's text, or one in the same shape built from the
// name for APIs the catalog does not know (CRDs).
func warning(obj api.APIRequestCount) string {
	if obj.Status.Warning != "" {
		return obj.Status.Warning
	}
	parts := strings.SplitN(obj.Metadata.Name, ".", 3)
	gv := parts[1%len(parts)]
	if len(parts) == 3 {
		gv = parts[2] + "/" + parts[1]
	}
	text := gv + " " + parts[0] + " is deprecated"
	if r := obj.Status.RemovedInRelease; r != "" {
		text += ", unavailable in v" + r + "+"
	}
	return text
}

// maxNamedClients is how many clients a warning line names.
const maxNamedClients = 3

// WriteText writes one line per finding in the Kubernetes warning format,
// removed APIs first, then a verdict.
func (r CheckResult) WriteText(w io.Writer) error {
	for _, f := range r.Findings {
		{
			clients := f.Clients
			more := ""
			if len(clients) > maxNamedClients || f.ClientCount > len(clients) {
				if len(clients) > maxNamedClients {
					clients = clients[:maxNamedClients]
				}
				more = ", ..."
			}
			already := ""
			if f.AlreadyRemoved {
				already = " [already removed: clients get 404]"
			}
			if _, err := fmt.Fprintf(w, "Warning: %s (%d request%s in %s by %d client%s: %s%s)%s\n",
				f.Warning, f.Requests, pluralS(int(f.Requests)), r.Since, f.ClientCount, pluralS(f.ClientCount), strings.Join(clients, ", "), more, already); err != nil {
				return err
			}
		}
	}
	removed, deprecated := 0, 0
	for _, f := range r.Findings {
		if f.Severity == SeverityRemoved {
			removed++
		} else {
			deprecated++
		}
	}
	system := ""
	if r.ExcludeSystem {
		system = ", system users excluded"
	}
	var err error
	switch {
	case removed > 0:
		_, err = fmt.Fprintf(w, "NOT SAFE to upgrade to %s: %d API%s removed in or before %s %s requested in the last %s%s.\n",
			r.TargetVersion, removed, pluralS(removed), r.TargetVersion, wasWere(removed), r.Since, system)
	case r.ExitCode == ExitDeprecated:
		_, err = fmt.Fprintf(w, "FAILED (--warnings-as-errors): no API removed in or before %s was requested in the last %s%s, but %d deprecated API%s %s.\n",
			r.TargetVersion, r.Since, system, deprecated, pluralS(deprecated), wasWere(deprecated))
	case deprecated > 0:
		_, err = fmt.Fprintf(w, "Safe to upgrade to %s: no API removed in or before it was requested in the last %s%s; %d deprecated API%s %s requested.\n",
			r.TargetVersion, r.Since, system, deprecated, pluralS(deprecated), wasWere(deprecated))
	default:
		_, err = fmt.Fprintf(w, "Safe to upgrade to %s: no deprecated API was requested in the last %s%s.\n", r.TargetVersion, r.Since, system)
	}
	return err
}

func pluralS(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}

func wasWere(n int) string {
	if n == 1 {
		return "was"
	}
	return "were"
}
