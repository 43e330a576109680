package verdict

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strings"

	sunsetv1 "github.com/kube-sunset/sunset/api/v1"
	"github.com/kube-sunset/sunset/catalog"
)

// steps are the releases in (from, target] at which something requested
// breaks, oldest first: an API removed in it with callers neither stopped
// nor exempted, or a webhook server whose certificate it starts refusing.
func steps(res sunsetv1.CheckResult, from, target catalog.Release) []sunsetv1.Step {
	byRelease := map[catalog.Release][]string{}
	add := func(release, name string) {
		r, err := catalog.ParseRelease(release)
		if err != nil || !from.Less(r) || target.Less(r) {
			return
		}
		byRelease[r] = append(byRelease[r], name)
	}
	for _, f := range res.Findings {
		if !f.Accepted {
			add(f.RemovedIn, f.Name)
		}
	}
	for _, c := range res.WebhookCertificates {
		add(c.RefusedIn, "webhook server "+c.Host)
	}
	releases := slices.SortedFunc(maps.Keys(byRelease), func(a, b catalog.Release) int {
		return cmp.Or(cmp.Compare(a.Major, b.Major), cmp.Compare(a.Minor, b.Minor))
	})
	out := make([]sunsetv1.Step, 0, len(releases))
	for _, r := range releases {
		out = append(out, sunsetv1.Step{Release: r.String(), ExitCode: sunsetv1.ExitCodeRemoved, Findings: byRelease[r]})
	}
	return out
}

// stepsSentence says where an upgrade across several minors breaks.
func stepsSentence(from, target string, steps []sunsetv1.Step) string {
	if len(steps) == 0 {
		return fmt.Sprintf(" Upgrading from %s, no release up to %s removes anything still requested.", from, target)
	}
	parts := make([]string, len(steps))
	for i, s := range steps {
		parts[i] = fmt.Sprintf("%s (%s)", s.Release, strings.Join(s.Findings, ", "))
	}
	return fmt.Sprintf(" Upgrading from %s, the first release that breaks is %s; breaking at each: %s.", from, steps[0].Release, strings.Join(parts, "; "))
}
