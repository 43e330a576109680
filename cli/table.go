package cli

import (
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"sigs.k8s.io/yaml"

	sunsetv1 "github.com/kube-sunset/sunset/api/v1"
	"github.com/kube-sunset/sunset/verdict"
	"github.com/kube-sunset/sunset/workload"
)

// outputFormat is an output format of `sunset report`.
type outputFormat string

// Output formats, as kubectl's -o.
const (
	formatTable outputFormat = "table"
	formatWide  outputFormat = "wide"
	formatJSON  outputFormat = "json"
	formatYAML  outputFormat = "yaml"
)

// parseFormat checks an -o value.
func parseFormat(s string) (outputFormat, error) {
	switch f := outputFormat(s); f {
	case formatTable, formatWide, formatJSON, formatYAML:
		return f, nil
	case "":
		return formatTable, nil
	}
	return "", fmt.Errorf("-o %q is not one of table, wide, json, yaml", s)
}

// reportOptions shape what a report counts.
type reportOptions struct {
	// ExcludeSystem leaves system identities out of counts, top users and
	// the rows of APIs only they call.
	ExcludeSystem bool
	// Since is the window the rows and top users cover.
	Since time.Duration
	// NoHeaders leaves out the header line of tables.
	NoHeaders bool
}

// tableRow is one API as a table shows it.
type tableRow struct {
	Name           string
	RemovedIn      string
	Removed        bool
	CurrentHour    int64
	Last24h        int64
	Window         int64
	TopUser        string
	TopUserAgent   string
	Replacement    string
	Nodes          []string
	Workload       string
	WindowClients  int
	WindowUserList []string
}

// tableRows computes the table rows of a list, leaving out APIs with no requests
// in the window once system traffic is excluded (if it is).
func tableRows(list sunsetv1.APIRequestCountList, o reportOptions) []tableRow {
	var rows []tableRow
	for _, obj := range list.Items {
		st := obj.Status
		r := tableRow{Name: obj.Metadata.Name, RemovedIn: st.RemovedInRelease, Removed: st.Removed,
			CurrentHour: st.CurrentHour.RequestCount, Last24h: st.RequestCount}
		if o.ExcludeSystem {
			r.CurrentHour -= st.CurrentHour.SystemRequestCount
			r.Last24h -= st.SystemRequestCount
		}
		var users []sunsetv1.WindowUser
		r.Window, r.WindowClients, users = verdict.WindowUse(obj, o.ExcludeSystem)
		for _, u := range users {
			r.WindowUserList = append(r.WindowUserList, u.UserName)
		}
		if len(users) > 0 {
			r.TopUser = users[0].UserName
			if len(users[0].UserAgents) > 0 {
				r.TopUserAgent = users[0].UserAgents[0]
			}
		}
		if r.Window == 0 {
			continue
		}
		if rep := st.Replacement; rep != nil {
			r.Replacement = groupVersion(rep.Group, rep.Version) + " " + rep.Kind
		}
		r.Nodes = nodes(obj)
		r.Workload = workloadOf(r.TopUser)
		rows = append(rows, r)
	}
	return rows
}

func groupVersion(group, version string) string {
	if group == "" {
		return version
	}
	return group + "/" + version
}

func nodes(obj sunsetv1.APIRequestCount) []string {
	seen := map[string]bool{}
	for _, h := range obj.Status.Last24h {
		for _, n := range h.ByNode {
			seen[n.NodeName] = true
		}
	}
	out := make([]string, 0, len(seen))
	for n := range seen {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// workloadOf names the namespace and service account of a service-account
// username ("system:serviceaccount:ci:deployer" → "ci/deployer"), or "".
func workloadOf(username string) string {
	ns, sa, ok := workload.ServiceAccount(username)
	if !ok {
		return ""
	}
	return ns + "/" + sa
}

// FormatDuration writes whole-hour durations the way people say them:
// 24h, 168h, 90m.
func FormatDuration(d time.Duration) string { return verdict.FormatDuration(d) }

// Dash is s, or "-" in place of an empty s, for a table's cell.
func Dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// writeTable writes rows as kubectl does: aligned columns, upper-case
// headers. Wide adds replacement, nodes and workload. Every cell is
// escaped for the terminal: names and user agents come from audit data.
func writeTable(w io.Writer, rows []tableRow, o reportOptions, wide bool) error {
	tw := tabwriter.NewWriter(w, 0, 8, 3, ' ', 0)
	header := []string{"NAME", "REMOVED IN", requestsHeader("CURRENT HOUR", o), requestsHeader("24H", o)}
	windowed := o.Since != 24*time.Hour
	if windowed {
		header = append(header, requestsHeader(strings.ToUpper(FormatDuration(o.Since)), o))
	}
	header = append(header, "TOP USER", "TOP USER AGENT")
	if wide {
		header = append(header, "REPLACEMENT", "NODES", "WORKLOAD")
	}
	if !o.NoHeaders {
		fmt.Fprintln(tw, strings.Join(header, "\t"))
	}
	for _, r := range rows {
		removed := Dash(r.RemovedIn)
		if r.Removed {
			removed += " (removed)"
		}
		cols := []string{r.Name, removed, fmt.Sprint(r.CurrentHour), fmt.Sprint(r.Last24h)}
		if windowed {
			cols = append(cols, fmt.Sprint(r.Window))
		}
		cols = append(cols, Dash(r.TopUser), Dash(r.TopUserAgent))
		if wide {
			cols = append(cols, Dash(r.Replacement), Dash(strings.Join(r.Nodes, ",")), Dash(r.Workload))
		}
		fmt.Fprintln(tw, strings.Join(terminalCells(cols), "\t"))
	}
	return tw.Flush()
}

// requestsHeader is the header of a count column over span ("24H"). With
// system identities excluded it says so: the objects of -o json and
// jsonpath keep OpenShift's totals, every user included, so the table's
// number is not their requestCount.
func requestsHeader(span string, o reportOptions) string {
	if o.ExcludeSystem {
		return "NON-SYSTEM REQUESTS (" + span + ")"
	}
	return "REQUESTS (" + span + ")"
}

// encodeObject writes v as indented JSON or as YAML.
func encodeObject(w io.Writer, v any, f outputFormat) error {
	var b []byte
	var err error
	switch f {
	case formatYAML:
		b, err = yaml.Marshal(v)
	default:
		b, err = jsonIndent(v)
	}
	if err != nil {
		return err
	}
	_, err = w.Write(b)
	return err
}

// keptAPIs is list with only the APIs that rows show, for the outputs that
// print objects rather than rows.
func keptAPIs(list sunsetv1.APIRequestCountList, rows []tableRow) sunsetv1.APIRequestCountList {
	kept := make(map[string]bool, len(rows))
	for _, r := range rows {
		kept[r.Name] = true
	}
	filtered := list
	filtered.Items = []sunsetv1.APIRequestCount{}
	for _, it := range list.Items {
		if kept[it.Metadata.Name] {
			filtered.Items = append(filtered.Items, it)
		}
	}
	return filtered
}
