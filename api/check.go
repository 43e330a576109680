package api

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/kube-sunset/sunset/catalog"
	"github.com/kube-sunset/sunset/internal/plural"
	"github.com/kube-sunset/sunset/scan"
)

// Exit codes of an upgrade check; `sunset check` exits with them.
const (
	// ExitSafe: no API removed at or before the target was requested.
	ExitSafe = 0
	// ExitError: the check itself failed (usage, connection, data).
	ExitError = 1
	// ExitDeprecated: only deprecated, not yet removed, APIs were requested,
	// and warnings count as errors.
	ExitDeprecated = 2
	// ExitRemoved: APIs removed at or before the target were requested,
	// or the target's kube-apiserver refuses a webhook server's
	// certificate.
	ExitRemoved = 3
)

// Severity of a finding.
const (
	SeverityRemoved    = catalog.StateRemoved
	SeverityDeprecated = catalog.StateDeprecated
	// SeverityRefused: the target's kube-apiserver refuses a webhook
	// server's certificate whatever its settings.
	SeverityRefused = "refused"
)

// CheckOptions configure Check.
type CheckOptions struct {
	Target           catalog.Release
	Since            time.Duration
	ExcludeSystem    bool
	WarningsAsErrors bool
	// WebhookCertificates are the webhook servers whose certificate
	// kube-apiserver flagged in the window (WebhookCountList.Certificates).
	WebhookCertificates []WebhookCertificate
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

// CertificateFinding is a webhook server whose certificate kube-apiserver
// flagged in the window. The target refuses it (SeverityRefused), or
// accepts it only while GODEBUG says so, or not yet by default
// (SeverityDeprecated). System users are not left out: a webhook fails
// for every caller alike.
type CertificateFinding struct {
	Cluster  string `json:"cluster"`
	Host     string `json:"host"`
	Problem  string `json:"problem"`
	Severity string `json:"severity"`
	// RefusedIn is the first release that refuses it whatever its
	// settings.
	RefusedIn string `json:"refusedInRelease"`
	// Warning says what is wrong and from which releases it is refused.
	Warning  string `json:"warning"`
	Requests int64  `json:"requests"`
	// Resources are those requested, most requests first.
	Resources []string `json:"resources"`
}

// CheckResult is the verdict of the upgrade gate.
type CheckResult struct {
	TargetVersion string    `json:"targetVersion"`
	Since         string    `json:"since"`
	ExcludeSystem bool      `json:"excludeSystem"`
	ExitCode      int       `json:"exitCode"`
	Findings      []Finding `json:"findings"`
	// WebhookCertificates are the webhook servers whose certificate
	// kube-apiserver flagged, refused first; left out when none was.
	WebhookCertificates []CertificateFinding `json:"webhookCertificates,omitempty"`
	// Message is the verdict in one sentence, as `sunset check` ends.
	Message string `json:"message"`
	// Scan is what a scan of manifests, charts or the cluster found
	// (`sunset check --scan`, or the server's cluster scan), judged at
	// the same target, and ScanVerdict its sentence; ExitCode covers both.
	Scan        *scan.Result `json:"scan,omitempty"`
	ScanVerdict string       `json:"scanVerdict,omitempty"`
}

// Check decides whether upgrading to the target is safe from what list says
// was requested and from the webhook servers o.WebhookCertificates names.
// list must have been read with Since set, so each item has a window, and
// with enough users (MaxUsersToReport) that the top non-system clients are
// known even when system identities lead.
func Check(list APIRequestCountList, o CheckOptions) CheckResult {
	res := CheckResult{TargetVersion: o.Target.String(), Since: FormatDuration(o.Since), ExcludeSystem: o.ExcludeSystem, Findings: []Finding{}}
	for _, obj := range list.Items {
		requests, clients, users := WindowUse(obj, o.ExcludeSystem)
		if requests == 0 {
			continue
		}
		st := obj.Status
		f := Finding{Name: obj.Metadata.Name, RemovedIn: st.RemovedInRelease, AlreadyRemoved: st.Removed, Warning: warningText(obj),
			Requests: requests, ClientCount: clients, Clients: []string{}, Severity: SeverityDeprecated}
		for _, u := range users {
			f.Clients = append(f.Clients, u.UserName)
		}
		rem, err := catalog.ParseRelease(st.RemovedInRelease)
		if st.Removed || (err == nil && !o.Target.Less(rem)) {
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
	res.WebhookCertificates = certificateFindings(o.WebhookCertificates, o.Target)
	for _, f := range res.Findings {
		if f.Severity == SeverityRemoved {
			res.ExitCode = ExitRemoved
		}
	}
	for _, f := range res.WebhookCertificates {
		if f.Severity == SeverityRefused {
			res.ExitCode = ExitRemoved
		}
	}
	if res.ExitCode == ExitSafe && o.WarningsAsErrors && len(res.Findings)+len(res.WebhookCertificates) > 0 {
		res.ExitCode = ExitDeprecated
	}
	res.Message = res.verdict()
	return res
}

// certificateFindings judges each flagged server against the target,
// refused first, then as certs lists them.
func certificateFindings(certs []WebhookCertificate, target catalog.Release) []CertificateFinding {
	var out []CertificateFinding
	for _, c := range certs {
		f := CertificateFinding{Cluster: c.Cluster, Host: c.Host, Problem: c.Problem, Severity: SeverityDeprecated,
			RefusedIn: c.RefusedInRelease, Requests: c.RequestCount, Resources: []string{}}
		if refused, err := catalog.ParseRelease(c.RefusedInRelease); err == nil && !target.Less(refused) {
			f.Severity = SeverityRefused
		}
		for _, r := range c.ByResource {
			name := r.Name
			if r.Subresource != "" {
				name += "/" + r.Subresource
			}
			f.Resources = append(f.Resources, name)
		}
		f.Warning = fmt.Sprintf("the serving certificate of webhook server %s %s: kube-apiserver refuses it by default in v%s+ (GODEBUG=%s lets it through) and always in v%s+",
			c.Host, c.Reason, c.RefusedByDefaultInRelease, c.GODEBUG, c.RefusedInRelease)
		out = append(out, f)
	}
	slices.SortStableFunc(out, func(a, b CertificateFinding) int {
		if (a.Severity == SeverityRefused) != (b.Severity == SeverityRefused) {
			if a.Severity == SeverityRefused {
				return -1
			}
			return 1
		}
		return 0
	})
	return out
}

// WindowUse is what an object's window holds: requests, distinct clients
// (usernames), and the top users, most requests first; with excludeSystem,
// without system identities. Zero without a window.
func WindowUse(obj APIRequestCount, excludeSystem bool) (requests int64, clients int, users []WindowUser) {
	w := obj.Status.Window
	if w == nil {
		return 0, 0, nil
	}
	requests, clients = w.RequestCount, w.ClientCount
	if excludeSystem {
		requests -= w.SystemRequestCount
		clients -= w.SystemClientCount
	}
	for _, u := range w.ByUser {
		if !excludeSystem || !u.System {
			users = append(users, u)
		}
	}
	return requests, clients, users
}

// warningText is the catalog's text, or one in the same shape built from
// the name for APIs the catalog does not know (CRDs).
func warningText(obj APIRequestCount) string {
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

// verdict is the sentence `sunset check` ends with: about APIs, then, when
// kube-apiserver flagged webhook servers' certificates, about those.
func (r CheckResult) verdict() string {
	removed, deprecated := 0, 0
	for _, f := range r.Findings {
		if f.Severity == SeverityRemoved {
			removed++
		} else {
			deprecated++
		}
	}
	refused, accepted := 0, 0
	for _, f := range r.WebhookCertificates {
		if f.Severity == SeverityRefused {
			refused++
		} else {
			accepted++
		}
	}
	system := ""
	if r.ExcludeSystem {
		system = ", system users excluded"
	}
	refusing := fmt.Sprintf("kube-apiserver %s refuses the serving certificate of %d webhook server%s called in the last %s",
		r.TargetVersion, refused, plural.S(refused), r.Since)
	switch {
	case removed > 0 && refused > 0:
		return fmt.Sprintf("NOT SAFE to upgrade to %s: %d API%s removed in or before %s %s requested in the last %s%s, and %s.",
			r.TargetVersion, removed, plural.S(removed), r.TargetVersion, wasWere(removed), r.Since, system, refusing)
	case removed > 0:
		return fmt.Sprintf("NOT SAFE to upgrade to %s: %d API%s removed in or before %s %s requested in the last %s%s.",
			r.TargetVersion, removed, plural.S(removed), r.TargetVersion, wasWere(removed), r.Since, system)
	case refused > 0:
		return fmt.Sprintf("NOT SAFE to upgrade to %s: %s.", r.TargetVersion, refusing)
	}
	var also string
	if accepted > 0 {
		also = fmt.Sprintf("; kube-apiserver releases after %s refuse the serving certificate of %d webhook server%s called in the last %s",
			r.TargetVersion, accepted, plural.S(accepted), r.Since)
	}
	switch {
	case r.ExitCode == ExitDeprecated && deprecated == 0:
		return fmt.Sprintf("FAILED (--warnings-as-errors): no API removed in or before %s was requested in the last %s%s%s.",
			r.TargetVersion, r.Since, system, also)
	case r.ExitCode == ExitDeprecated:
		return fmt.Sprintf("FAILED (--warnings-as-errors): no API removed in or before %s was requested in the last %s%s, but %d deprecated API%s %s%s.",
			r.TargetVersion, r.Since, system, deprecated, plural.S(deprecated), wasWere(deprecated), also)
	case deprecated > 0:
		return fmt.Sprintf("Safe to upgrade to %s: no API removed in or before it was requested in the last %s%s; %d deprecated API%s %s requested%s.",
			r.TargetVersion, r.Since, system, deprecated, plural.S(deprecated), wasWere(deprecated), also)
	}
	return fmt.Sprintf("Safe to upgrade to %s: no deprecated API was requested in the last %s%s%s.", r.TargetVersion, r.Since, system, also)
}

func wasWere(n int) string {
	if n == 1 {
		return "was"
	}
	return "were"
}

// FormatDuration writes whole-hour durations the way people say them:
// 24h, 168h, 90m.
func FormatDuration(d time.Duration) string {
	h, m := int64(d/time.Hour), int64(d%time.Hour/time.Minute)
	switch {
	case d%time.Minute != 0:
		return d.String()
	case m == 0:
		return fmt.Sprintf("%dh", h)
	case h == 0:
		return fmt.Sprintf("%dm", m)
	}
	return fmt.Sprintf("%dh%dm", h, m)
}
