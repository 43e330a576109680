package cli

import (
	"cmp"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	sunsetv1 "github.com/kube-sunset/sunset/api/v1"
	"github.com/kube-sunset/sunset/internal/plural"
)

var sparks = []rune(" ▁▂▃▄▅▆▇█")

// sparkline draws counts as bars, highest = full block, zero = blank.
func sparkline(counts []int64) string {
	var top int64
	for _, c := range counts {
		top = max(top, c)
	}
	var b strings.Builder
	for _, c := range counts {
		switch {
		case c == 0:
			b.WriteRune(sparks[0])
		case top == 1:
			b.WriteRune(sparks[len(sparks)-1])
		default:
			// Any request shows at least the lowest bar; the peak is full.
			i := 1 + int((c-1)*int64(len(sparks)-2)/(top-1))
			b.WriteRune(sparks[i])
		}
	}
	return b.String()
}

// hourly returns last24h oldest first, ending at the hour of now.
func hourly(st sunsetv1.APIRequestCountStatus, now time.Time, excludeSystem bool) (counts []int64, firstHour int) {
	cur := now.UTC().Hour()
	first := (cur + 1) % 24
	for i := 0; i < 24 && len(st.Last24h) == 24; i++ {
		h := st.Last24h[(first+i)%24]
		c := h.RequestCount
		if excludeSystem {
			c -= h.SystemRequestCount
		}
		counts = append(counts, c)
	}
	return counts, first
}

type userTotal struct {
	username, userAgent string
	system              bool
	total, removed      int64
	verbs               map[string]int64
	workload            *sunsetv1.Workload
}

// describeAPI writes one API as a readable breakdown: lifecycle, the last 24
// hours as a bar row, and requests per node and per user.
func describeAPI(w io.Writer, obj sunsetv1.APIRequestCount, now time.Time, o reportOptions) error {
	st := obj.Status
	total, current := st.RequestCount, st.CurrentHour.RequestCount
	if o.ExcludeSystem {
		total -= st.SystemRequestCount
		current -= st.CurrentHour.SystemRequestCount
	}
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	// Every string below but the labels comes from audit data: each is
	// escaped for the terminal.
	fmt.Fprintf(tw, "Name:\t%s\n", Terminal(obj.Metadata.Name))
	removed := Terminal(Dash(st.RemovedInRelease))
	if st.Removed {
		removed += fmt.Sprintf(" (already removed: %d requests got 404 in the last 24h)", st.RemovedRequestCount)
	}
	fmt.Fprintf(tw, "Removed in:\t%s\n", removed)
	fmt.Fprintf(tw, "Deprecated in:\t%s\n", Terminal(Dash(st.DeprecatedInRelease)))
	if r := st.Replacement; r != nil {
		fmt.Fprintf(tw, "Replacement:\t%s %s\n", Terminal(groupVersion(r.Group, r.Version)), Terminal(r.Kind))
	} else {
		fmt.Fprintf(tw, "Replacement:\t-\n")
	}
	fmt.Fprintf(tw, "Warning:\t%s\n", Terminal(Dash(st.Warning)))
	sys := ""
	if o.ExcludeSystem && st.SystemRequestCount > 0 {
		sys = fmt.Sprintf(" (%d more from system users, not shown)", st.SystemRequestCount)
	} else if st.SystemRequestCount > 0 {
		sys = fmt.Sprintf(" (%d from system users)", st.SystemRequestCount)
	}
	fmt.Fprintf(tw, "Requests:\t%d in the last 24h%s, %d in the current hour\n", total, sys, current)
	if err := tw.Flush(); err != nil {
		return err
	}

	counts, first := hourly(st, now, o.ExcludeSystem)
	fmt.Fprintf(w, "\nLast 24h, per UTC hour from %02d:00 to %02d:00:\n  %s\n", first, now.UTC().Hour(), sparkline(counts))
	var peak int64
	for _, c := range counts {
		peak = max(peak, c)
	}
	fmt.Fprintf(w, "  peak %d request%s in an hour\n", peak, plural.S(int(peak)))

	// Node totals come from the nodes' own counts, which include every
	// user; byUser lists only the top users of each node and hour.
	nodeTotals := map[[2]string]int64{}
	users := map[[2]string]*userTotal{}
	var unlisted int64 // requests of users that byUser left out
	// Workloads are listed once per client; a client seen in several
	// clusters shows the first cluster's.
	workloads := map[[2]string]*sunsetv1.Workload{}
	for _, cw := range st.Workloads {
		key := [2]string{cw.UserName, cw.UserAgent}
		if workloads[key] == nil {
			workloads[key] = cw.Workload
		}
	}
	for _, h := range st.Last24h {
		for _, n := range h.ByNode {
			nodeTotal := n.RequestCount
			if o.ExcludeSystem {
				nodeTotal -= n.SystemRequestCount
			}
			if nodeTotal > 0 {
				nodeTotals[[2]string{n.Cluster, n.NodeName}] += nodeTotal
			}
			var listed int64
			for _, u := range n.ByUser {
				if o.ExcludeSystem && u.System {
					continue
				}
				listed += u.RequestCount
				key := [2]string{u.UserName, u.UserAgent}
				ut := users[key]
				if ut == nil {
					ut = &userTotal{username: u.UserName, userAgent: u.UserAgent, system: u.System, verbs: map[string]int64{}}
					users[key] = ut
				}
				ut.total += u.RequestCount
				ut.removed += u.RemovedRequestCount
				if ut.workload == nil {
					ut.workload = workloads[key]
				}
				for _, v := range u.ByVerb {
					ut.verbs[v.Verb] += v.RequestCount
				}
			}
			unlisted += nodeTotal - listed
		}
	}

	fmt.Fprintln(w, "\nBy node (last 24h):")
	tw = tabwriter.NewWriter(w, 0, 8, 3, ' ', 0)
	fmt.Fprintln(tw, "  NODE\tCLUSTER\tREQUESTS")
	nodeKeys := make([][2]string, 0, len(nodeTotals))
	for k := range nodeTotals {
		nodeKeys = append(nodeKeys, k)
	}
	slices.SortFunc(nodeKeys, func(a, b [2]string) int { return cmp.Or(cmp.Compare(a[0], b[0]), cmp.Compare(a[1], b[1])) })
	for _, k := range nodeKeys {
		fmt.Fprintf(tw, "  %s\t%s\t%d\n", Terminal(k[1]), Terminal(k[0]), nodeTotals[k])
	}
	if err := tw.Flush(); err != nil {
		return err
	}

	fmt.Fprintln(w, "\nBy user (last 24h):")
	tw = tabwriter.NewWriter(w, 0, 8, 3, ' ', 0)
	fmt.Fprintln(tw, "  USER\tUSER AGENT\tWORKLOAD\tREQUESTS\tVERBS")
	list := make([]*userTotal, 0, len(users))
	for _, u := range users {
		list = append(list, u)
	}
	slices.SortFunc(list, func(a, b *userTotal) int {
		return cmp.Or(cmp.Compare(b.total, a.total), cmp.Compare(a.username, b.username), cmp.Compare(a.userAgent, b.userAgent))
	})
	for _, u := range list {
		verbs := make([]string, 0, len(u.verbs))
		for v, c := range u.verbs {
			verbs = append(verbs, fmt.Sprintf("%s=%d", v, c))
		}
		slices.Sort(verbs)
		name := Terminal(u.username)
		if u.system {
			name += " (system)"
		}
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%d\t%s\n", name, Terminal(Dash(u.userAgent)), Terminal(Dash(describeWorkload(u.username, u.workload))), u.total, Terminal(strings.Join(verbs, " ")))
	}
	if unlisted > 0 {
		// Per user, only the top users of each node and hour are known.
		fmt.Fprintf(tw, "  (users beyond the top %d of a node and hour)\t-\t-\t%d\t-\n", obj.Spec.NumberOfUsersToReport, unlisted)
	}
	return tw.Flush()
}

// describeWorkload is "ns/sa", with the likely owner and pod count when
// pod-bound tokens were seen: "apps/sync (Deployment legacy-sync, 3 pods)".
func describeWorkload(username string, w *sunsetv1.Workload) string {
	s := workloadOf(username)
	if w == nil || w.Owner == nil {
		return s
	}
	return fmt.Sprintf("%s (%s %s, %d pod%s)", s, w.Owner.Kind, w.Owner.Name, len(w.Pods), plural.S(len(w.Pods)))
}
