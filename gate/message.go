package gate

import (
	"fmt"
	"strings"

	sunsetv1 "github.com/kube-sunset/sunset/api/v1"
	"github.com/kube-sunset/sunset/catalog"
	"github.com/kube-sunset/sunset/gate/kubeversion"
)

// maxClientsNamed is how many callers a line names; the verdict keeps
// more.
const maxClientsNamed = 3

// refusal is the message of a refused upgrade: the verdict's sentence,
// each removed API with its callers and replacement, and how to override.
func refusal(upgrade, what string, from kubeversion.Version, res sunsetv1.CheckResult) string {
	var b strings.Builder
	fmt.Fprintf(&b, "sunset: %s is refused", upgrade)
	if first := firstBreak(from.Release(), res); !first.IsZero() {
		fmt.Fprintf(&b, ", first breaking at %s", first)
	}
	fmt.Fprintf(&b, ": %s", res.Message)
	for _, f := range res.Findings {
		if f.Severity != sunsetv1.SeverityRemoved {
			continue
		}
		fmt.Fprintf(&b, "\n- %s: %s", f.Warning, use(f, res.Since))
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

// firstBreak is the first release after from that removes an API in use
// or refuses a webhook certificate; zero when every one of them is
// already broken at from.
func firstBreak(from catalog.Release, res sunsetv1.CheckResult) catalog.Release {
	var first catalog.Release
	consider := func(rel string) {
		r, err := catalog.ParseRelease(rel)
		if err != nil || !from.Less(r) {
			return
		}
		if first.IsZero() || r.Less(first) {
			first = r
		}
	}
	for _, f := range res.Findings {
		if f.Severity == sunsetv1.SeverityRemoved && !f.AlreadyRemoved {
			consider(f.RemovedIn)
		}
	}
	for _, c := range res.WebhookCertificates {
		if c.Severity == sunsetv1.SeverityRefused {
			consider(c.RefusedIn)
		}
	}
	return first
}

// deprecations are the warnings of an allowed upgrade, one per deprecated
// API and webhook certificate in use.
func deprecations(to kubeversion.Version, res sunsetv1.CheckResult) []string {
	var out []string
	for _, f := range res.Findings {
		out = append(out, fmt.Sprintf("sunset: %s: %s", f.Warning, use(f, res.Since)))
	}
	for _, c := range res.WebhookCertificates {
		out = append(out, "sunset: "+c.Warning)
	}
	if len(out) > 0 {
		out = append(out, fmt.Sprintf("sunset: nothing in use is removed by %s; the APIs above are deprecated", to.Release()))
	}
	return out
}

// use says how much an API was requested and by whom.
func use(f sunsetv1.Finding, since string) string {
	s := fmt.Sprintf("%d request%s in the last %s", f.Requests, plural(f.Requests), since)
	if len(f.Clients) == 0 {
		return s
	}
	named := f.Clients[:min(len(f.Clients), maxClientsNamed)]
	s += " by " + strings.Join(named, ", ")
	if more := f.ClientCount - len(named); more > 0 {
		s += fmt.Sprintf(" and %d more", more)
	}
	return s
}

func plural(n int64) string {
	if n == 1 {
		return ""
	}
	return "s"
}
