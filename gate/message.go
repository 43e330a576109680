package gate

import (
	"fmt"
	"strings"

	sunsetv1 "github.com/kube-sunset/sunset/api/v1"
	"github.com/kube-sunset/sunset/gate/kubeversion"
)

// maxClientsNamed is how many callers a line names; the verdict keeps
// more.
const maxClientsNamed = 3

// refusal is the message of a refused upgrade: the verdict's sentences
// (with, across several minors, where it first breaks), each removed API
// that counts with its callers and replacement, and how to override.
func refusal(upgrade, what string, res sunsetv1.CheckResult) string {
	var b strings.Builder
	fmt.Fprintf(&b, "sunset: %s is refused: %s", upgrade, res.Message)
	for _, f := range res.Findings {
		if f.Severity != sunsetv1.SeverityRemoved || f.Accepted {
			continue
		}
		fmt.Fprintf(&b, "\n- %s: %s", f.Warning, use(f, res.Since, true))
		if f.AlreadyRemoved {
			b.WriteString(" (already removed: these calls fail today)")
		}
	}
	for _, c := range res.WebhookCertificates {
		if c.Severity == sunsetv1.SeverityRefused {
			fmt.Fprintf(&b, "\n- %s", c.Warning)
		}
	}
	fmt.Fprintf(&b, "\n%s", howToOverride(what))
	return b.String()
}

// deprecations are the warnings of an allowed upgrade, one per deprecated
// API and webhook certificate in use.
func deprecations(to kubeversion.Version, res sunsetv1.CheckResult) []string {
	var out []string
	for _, f := range res.Findings {
		if f.Accepted {
			out = append(out, fmt.Sprintf("sunset: %s: every caller has stopped or is exempted", f.Warning))
			continue
		}
		out = append(out, fmt.Sprintf("sunset: %s: %s", f.Warning, use(f, res.Since, false)))
	}
	for _, c := range res.WebhookCertificates {
		out = append(out, "sunset: "+c.Warning)
	}
	if len(out) > 0 {
		out = append(out, fmt.Sprintf("sunset: allowed: nothing removed by %s is still called", to.Release()))
	}
	return out
}

// use says how much an API was requested and by whom: the callers that
// count, and with detail each one's user agents and the hour it was last
// seen, where the verdict says. Warnings go without detail: clients cut
// long ones.
func use(f sunsetv1.Finding, since string, detail bool) string {
	s := fmt.Sprintf("%d request%s in the last %s", f.Requests, plural(f.Requests), since)
	var named []string
	for _, c := range f.Callers {
		if c.Stopped || c.Exemption != nil {
			continue
		}
		if detail {
			named = append(named, caller(c))
		} else {
			named = append(named, c.UserName)
		}
	}
	if len(f.Callers) == 0 {
		named = f.Clients
	}
	if len(named) == 0 {
		return s
	}
	shown := named[:min(len(named), maxClientsNamed)]
	s += " by " + strings.Join(shown, ", ")
	// Beyond the users the verdict lists, ClientCount knows how many
	// there were.
	more := len(named) - len(shown)
	if len(f.Callers) == 0 {
		more = f.ClientCount - len(shown)
	}
	if more > 0 {
		s += fmt.Sprintf(" and %d more", more)
	}
	return s
}

// caller is a user as a refusal names it: alice (kubectl/v1.36.0, last
// seen 2026-11-21 19:00 UTC).
func caller(c sunsetv1.Caller) string {
	var about []string
	if len(c.UserAgents) > 0 {
		about = append(about, strings.Join(c.UserAgents, ", "))
	}
	if !c.LastSeen.IsZero() {
		about = append(about, "last seen "+c.LastSeen.UTC().Format("2006-01-02 15:04 MST"))
	}
	if len(about) == 0 {
		return c.UserName
	}
	return fmt.Sprintf("%s (%s)", c.UserName, strings.Join(about, "; "))
}

func plural(n int64) string {
	if n == 1 {
		return ""
	}
	return "s"
}
