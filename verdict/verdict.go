// Package verdict decides an upgrade check: from what the API says was
// requested in a window, which webhook servers' certificates
// kube-apiserver flagged and what a scan found, whether upgrading to a
// target release is safe, in one sentence and one exit code. The server's
// upgradechecks and `sunset check` both decide here, so that they give one
// answer; it is a package apart from the server's (api) so that the CLI
// decides from what a client read without linking the query engine.
package verdict

import (
	"fmt"
	"slices"
	"strings"
	"time"

	sunsetv1 "github.com/kube-sunset/sunset/api/v1"
	"github.com/kube-sunset/sunset/catalog"
	"github.com/kube-sunset/sunset/internal/plural"
	"github.com/kube-sunset/sunset/scan/report"
)

// CheckOptions configure Check.
type CheckOptions struct {
	Target           catalog.Release
	Since            time.Duration
	ExcludeSystem    bool
	WarningsAsErrors bool
	// WebhookCertificates are the webhook servers whose certificate
	// kube-apiserver flagged in the window (WebhookCountList.Certificates).
	WebhookCertificates []sunsetv1.WebhookCertificate
	// Now is the time of the check, which CleanFor and the exemptions'
	// expiry are measured against. Zero: no caller counts as stopped and
	// no exemption applies.
	Now time.Time
	// CleanFor: a caller silent for at least this long (its last hour
	// ended CleanFor or more before Now) is treated as fixed. Zero: never.
	CleanFor time.Duration
	// Exemptions accept calls until they expire (Now >= Expires).
	Exemptions []sunsetv1.Exemption
	// From, if set, is the release upgraded from: the result then says at
	// which releases in (From, Target] something breaks.
	From catalog.Release
}

// Check decides whether upgrading to the target is safe from what list says
// was requested and from the webhook servers o.WebhookCertificates names.
// list must have been read with Since set, so each item has a window, and
// with enough users (sunsetv1.MaxUsersToReport) that the top non-system clients are
// known even when system identities lead.
func Check(list sunsetv1.APIRequestCountList, o CheckOptions) sunsetv1.CheckResult {
	res := sunsetv1.CheckResult{TargetVersion: o.Target.String(), Since: FormatDuration(o.Since), ExcludeSystem: o.ExcludeSystem, Findings: []sunsetv1.Finding{}}
	if o.CleanFor > 0 {
		res.CleanFor = FormatDuration(o.CleanFor)
	}
	active, expired := SplitExemptions(o.Exemptions, o.Now)
	res.Exemptions, res.ExpiredExemptions, res.StaleExemptions = active, expired, StaleExemptions(list, active)
	for _, obj := range list.Items {
		requests, clients, users := WindowUse(obj, o.ExcludeSystem)
		if requests == 0 {
			continue
		}
		st := obj.Status
		f := sunsetv1.Finding{Name: obj.Metadata.Name, RemovedIn: st.RemovedInRelease, AlreadyRemoved: st.Removed, Warning: warningText(obj),
			Requests: requests, ClientCount: clients, Clients: []string{}, Severity: sunsetv1.SeverityDeprecated}
		for _, u := range users {
			f.Clients = append(f.Clients, u.UserName)
		}
		var stopped int
		f.Callers, stopped, f.Accepted = callers(obj.Metadata.Name, clients, users, active, o)
		res.StoppedCallers += stopped
		rem, err := catalog.ParseRelease(st.RemovedInRelease)
		if st.Removed || (err == nil && !o.Target.Less(rem)) {
			f.Severity = sunsetv1.SeverityRemoved
		}
		res.Findings = append(res.Findings, f)
	}
	// Most urgent first: removed, then by removal release, soonest first;
	// APIs with no planned removal last.
	slices.SortStableFunc(res.Findings, func(a, b sunsetv1.Finding) int {
		if a.Severity != b.Severity {
			if a.Severity == sunsetv1.SeverityRemoved {
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
		if f.Severity == sunsetv1.SeverityRemoved && !f.Accepted {
			res.ExitCode = sunsetv1.ExitCodeRemoved
		}
	}
	for _, f := range res.WebhookCertificates {
		if f.Severity == sunsetv1.SeverityRefused {
			res.ExitCode = sunsetv1.ExitCodeRemoved
		}
	}
	if res.ExitCode == sunsetv1.ExitCodeSafe && o.WarningsAsErrors && counted(res.Findings)+len(res.WebhookCertificates) > 0 {
		res.ExitCode = sunsetv1.ExitCodeDeprecated
	}
	res.Message = message(res)
	if !o.From.IsZero() && o.From.Less(o.Target) {
		res.From = o.From.String()
		res.Steps = steps(res, o.From, o.Target)
		if len(res.Steps) > 0 {
			res.FirstBreaking = res.Steps[0].Release
		}
		res.Message += stepsSentence(res.From, res.TargetVersion, res.Steps)
	}
	return res
}

// certificateFindings judges each flagged server against the target,
// refused first, then as certs lists them.
func certificateFindings(certs []sunsetv1.WebhookCertificate, target catalog.Release) []sunsetv1.CertificateFinding {
	var out []sunsetv1.CertificateFinding
	for _, c := range certs {
		f := sunsetv1.CertificateFinding{Cluster: c.Cluster, Host: c.Host, Problem: c.Problem, Severity: sunsetv1.SeverityDeprecated,
			RefusedIn: c.RefusedInRelease, Requests: c.RequestCount, Resources: []string{}}
		if refused, err := catalog.ParseRelease(c.RefusedInRelease); err == nil && !target.Less(refused) {
			f.Severity = sunsetv1.SeverityRefused
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
	slices.SortStableFunc(out, func(a, b sunsetv1.CertificateFinding) int {
		if (a.Severity == sunsetv1.SeverityRefused) != (b.Severity == sunsetv1.SeverityRefused) {
			if a.Severity == sunsetv1.SeverityRefused {
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
func WindowUse(obj sunsetv1.APIRequestCount, excludeSystem bool) (requests int64, clients int, users []sunsetv1.WindowUser) {
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
func warningText(obj sunsetv1.APIRequestCount) string {
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

// message is the sentence `sunset check` ends with: about APIs, then, when
// kube-apiserver flagged webhook servers' certificates, about those.
func message(r sunsetv1.CheckResult) string {
	removed, deprecated, accepted := 0, 0, 0
	for _, f := range r.Findings {
		switch {
		case f.Accepted:
			accepted++
		case f.Severity == sunsetv1.SeverityRemoved:
			removed++
		default:
			deprecated++
		}
	}
	return verdictSentence(r, removed, deprecated) + acceptedSentence(r, accepted)
}

// counted is how many findings count against the verdict.
func counted(findings []sunsetv1.Finding) int {
	n := 0
	for _, f := range findings {
		if !f.Accepted {
			n++
		}
	}
	return n
}

// acceptedSentence names the findings every caller of which stopped or is
// exempted, and the exemptions that matched nothing.
func acceptedSentence(r sunsetv1.CheckResult, accepted int) string {
	out := ""
	if accepted > 0 {
		why := "every caller is exempted"
		switch {
		case r.CleanFor != "" && len(r.Exemptions) > 0:
			why = fmt.Sprintf("every caller is exempted or silent for %s", r.CleanFor)
		case r.CleanFor != "":
			why = fmt.Sprintf("every caller has been silent for %s", r.CleanFor)
		}
		out += fmt.Sprintf(" %d API%s requested not counted: %s.", accepted, plural.S(accepted), why)
	}
	if n := len(r.StaleExemptions); n > 0 {
		out += fmt.Sprintf(" %d exemption%s matched no request.", n, plural.S(n))
	}
	return out
}

// verdictSentence is the verdict over the findings that count.
func verdictSentence(r sunsetv1.CheckResult, removed, deprecated int) string {
	refused, accepted := 0, 0
	for _, f := range r.WebhookCertificates {
		if f.Severity == sunsetv1.SeverityRefused {
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
	case r.ExitCode == sunsetv1.ExitCodeDeprecated && deprecated == 0:
		return fmt.Sprintf("FAILED (--warnings-as-errors): no API removed in or before %s was requested in the last %s%s%s.",
			r.TargetVersion, r.Since, system, also)
	case r.ExitCode == sunsetv1.ExitCodeDeprecated:
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

// ScanExitCode is the exit code of a scan alone: ExitCodeError when an
// input could not be read (the verdict would be a guess), else as a
// check's.
func ScanExitCode(r report.Result, warningsAsErrors bool) sunsetv1.ExitCode {
	switch {
	case len(r.Errors) > 0:
		return sunsetv1.ExitCodeError
	case r.Removed() > 0:
		return sunsetv1.ExitCodeRemoved
	case r.Deprecated() > 0 && warningsAsErrors:
		return sunsetv1.ExitCodeDeprecated
	}
	return sunsetv1.ExitCodeSafe
}

// JoinScan adds a scan to a check for one verdict over both: removed APIs
// in either give ExitCodeRemoved; otherwise an incomplete scan gives
// ExitCodeError, since "safe" would be a guess; otherwise deprecated ones
// (with warnings as errors) give ExitCodeDeprecated.
func JoinScan(res *sunsetv1.CheckResult, sres report.Result, warningsAsErrors bool) {
	res.Scan, res.ScanVerdict = &sres, sres.Verdict(warningsAsErrors)
	scanCode := ScanExitCode(sres, warningsAsErrors)
	switch {
	case res.ExitCode == sunsetv1.ExitCodeRemoved || scanCode == sunsetv1.ExitCodeRemoved:
		res.ExitCode = sunsetv1.ExitCodeRemoved
	case scanCode == sunsetv1.ExitCodeError:
		res.ExitCode = sunsetv1.ExitCodeError
	default:
		res.ExitCode = max(res.ExitCode, scanCode)
	}
}
