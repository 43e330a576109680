package e2e

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net/url"
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// clientVerb is one client's requests to one API with one verb, on the test's
// only apiserver.
type clientVerb struct {
	API, User, UserAgent, Verb string
}

type counts struct{ Requests, DryRuns int64 }

// apiTotals are the status-level numbers of one API.
type apiTotals struct {
	RemovedInRelease            string
	Requests, DryRuns           int64
	AlreadyRemoved, System      int64
	Removed                     bool
	Nodes                       []string
	SystemUsers, NonSystemUsers []string
}

// tally is what either side says was counted.
type tally struct {
	byClient map[clientVerb]counts
	byAPI    map[string]apiTotals
	// workloads maps a username to the pods (pod@node) behind it.
	workloads map[string][]string
}

func newTally() tally {
	return tally{byClient: map[clientVerb]counts{}, byAPI: map[string]apiTotals{}, workloads: map[string][]string{}}
}

// alreadyRemoved are the APIs the test calls that kube-apiserver v1.36
// no longer serves, with the release that removed them. Their 404s carry
// no annotation; Sunset marks them from its catalog.
var alreadyRemoved = map[string]string{"cronjobs.v1beta1.batch": "1.25"}

// systemUsers are Sunset's default system identities (README,
// `system-users`).
var systemUsers = []string{
	"system:apiserver", "system:kube-controller-manager", "system:kube-scheduler",
	"system:serviceaccount:kube-system:generic-garbage-collector",
	"system:serviceaccount:kube-system:namespace-controller",
	"system:serviceaccount:kube-system:resourcequota-controller",
}

// auditEvent holds the fields of a logged audit event that the truths
// need.
type auditEvent struct {
	AuditID    string `json:"auditID"`
	Stage      string `json:"stage"`
	RequestURI string `json:"requestURI"`
	Verb       string `json:"verb"`
	User       struct {
		Username string              `json:"username"`
		Extra    map[string][]string `json:"extra"`
	} `json:"user"`
	UserAgent string `json:"userAgent"`
	ObjectRef *struct {
		Resource    string `json:"resource"`
		Subresource string `json:"subresource"`
		APIGroup    string `json:"apiGroup"`
		APIVersion  string `json:"apiVersion"`
	} `json:"objectRef"`
	ResponseStatus *struct {
		Code int `json:"code"`
	} `json:"responseStatus"`
	Annotations map[string]string `json:"annotations"`
}

// resource is the event's resource.version.group, or "" without an
// objectRef.
func (ev *auditEvent) resource() string {
	ref := ev.ObjectRef
	if ref == nil {
		return ""
	}
	name := ref.Resource + "." + ref.APIVersion
	if ref.APIGroup != "" {
		name += "." + ref.APIGroup
	}
	return name
}

// groundTruth reads kube-apiserver's own audit log: every request at
// ResponseComplete or Panic carrying k8s.io/deprecated, plus the 404s of
// already-removed APIs.
func groundTruth(t *testing.T, path string) (tally, int) {
	t.Helper()
	truth := newTally()
	lines := eachCompleted(t, path, truth.add)
	return truth, lines
}

// eachCompleted hands add every ResponseComplete or Panic event in
// kube-apiserver's audit log at path, and returns how many lines the log
// has. The log holds each request's events once and a request ends with
// exactly one of the two stages, so each is one request. Their auditIDs
// are no identity: kube-apiserver takes the caller's Audit-ID header as it
// is, so different requests may share one.
func eachCompleted(t *testing.T, path string, add func(ev *auditEvent)) int {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	r := bufio.NewReaderSize(f, 1<<20)
	lines := 0
	for {
		line, err := r.ReadBytes('\n')
		if len(line) > 0 {
			lines++
			var ev auditEvent
			if jerr := json.Unmarshal(line, &ev); jerr != nil {
				t.Fatalf("%s line %d: %v", path, lines, jerr)
			}
			if ev.Stage == "ResponseComplete" || ev.Stage == "Panic" {
				add(&ev)
			}
		}
		if err == io.EOF {
			return lines
		}
		if err != nil {
			t.Fatal(err)
		}
	}
}

func (tl tally) add(ev *auditEvent) {
	api := ev.resource()
	if api == "" {
		return
	}
	deprecated := ev.Annotations["k8s.io/deprecated"] == "true"
	removed := !deprecated && alreadyRemoved[api] != "" && ev.ResponseStatus != nil && ev.ResponseStatus.Code == 404
	if !deprecated && !removed {
		return
	}
	dry := int64(0)
	if u, err := url.ParseRequestURI(ev.RequestURI); err == nil && u.Query().Get("dryRun") == "All" {
		dry = 1
	}
	agent, _, _ := strings.Cut(ev.UserAgent, " ")
	key := clientVerb{API: api, User: ev.User.Username, UserAgent: agent, Verb: ev.Verb}
	c := tl.byClient[key]
	tl.byClient[key] = counts{c.Requests + 1, c.DryRuns + dry}

	tot := tl.byAPI[api]
	tot.RemovedInRelease = ev.Annotations["k8s.io/removed-release"]
	tot.Requests++
	tot.DryRuns += dry
	tot.Nodes = []string{clusterName + "/" + nodeName}
	system := slices.Contains(systemUsers, ev.User.Username)
	if system {
		tot.System++
		tot.SystemUsers = addSorted(tot.SystemUsers, ev.User.Username)
	} else {
		tot.NonSystemUsers = addSorted(tot.NonSystemUsers, ev.User.Username)
	}
	if removed {
		tot.RemovedInRelease = alreadyRemoved[api]
		tot.AlreadyRemoved++
		tot.Removed = true
	}
	tl.byAPI[api] = tot

	pods, nodes := ev.User.Extra["authentication.kubernetes.io/pod-name"], ev.User.Extra["authentication.kubernetes.io/node-name"]
	if len(pods) == 1 && len(nodes) == 1 {
		tl.workloads[ev.User.Username] = addSorted(tl.workloads[ev.User.Username], pods[0]+"@"+nodes[0])
	}
}

func addSorted(list []string, s string) []string {
	if i, found := slices.BinarySearch(list, s); !found {
		list = slices.Insert(list, i, s)
	}
	return list
}

// The parts of Sunset's APIRequestCount the comparison reads.
type requestCountList struct {
	Kind  string         `json:"kind"`
	Items []requestCount `json:"items"`
}

type requestCount struct {
	Metadata struct {
		Name string `json:"name"`
	} `json:"metadata"`
	Status struct {
		RemovedInRelease    string    `json:"removedInRelease"`
		RequestCount        int64     `json:"requestCount"`
		DryRunCount         int64     `json:"dryRunCount"`
		Removed             bool      `json:"removed"`
		RemovedRequestCount int64     `json:"removedRequestCount"`
		SystemRequestCount  int64     `json:"systemRequestCount"`
		Last24h             []hourLog `json:"last24h"`
		// Workloads lists each client of byUser once.
		Workloads []struct {
			Username string `json:"username"`
			Workload *struct {
				Namespace      string `json:"namespace"`
				ServiceAccount string `json:"serviceAccount"`
				Pods           []struct {
					Name string `json:"name"`
					Node string `json:"node"`
				} `json:"pods"`
			} `json:"workload"`
		} `json:"workloads"`
	} `json:"status"`
}

type hourLog struct {
	RequestCount int64 `json:"requestCount"`
	ByNode       []struct {
		NodeName     string `json:"nodeName"`
		Cluster      string `json:"cluster"`
		RequestCount int64  `json:"requestCount"`
		ByUser       []struct {
			Username     string `json:"username"`
			UserAgent    string `json:"userAgent"`
			RequestCount int64  `json:"requestCount"`
			DryRunCount  int64  `json:"dryRunCount"`
			System       bool   `json:"system"`
			ByVerb       []struct {
				Verb         string `json:"verb"`
				RequestCount int64  `json:"requestCount"`
				DryRunCount  int64  `json:"dryRunCount"`
			} `json:"byVerb"`
		} `json:"byUser"`
	} `json:"byNode"`
}

// sunsetTally reads the same numbers from Sunset's list, summing the hours
// of last24h (the test may cross an hour boundary).
func sunsetTally(t *testing.T, list requestCountList) tally {
	t.Helper()
	got := newTally()
	for _, item := range list.Items {
		st := item.Status
		tot := apiTotals{
			RemovedInRelease: st.RemovedInRelease,
			Requests:         st.RequestCount,
			DryRuns:          st.DryRunCount,
			AlreadyRemoved:   st.RemovedRequestCount,
			System:           st.SystemRequestCount,
			Removed:          st.Removed,
		}
		for _, hour := range st.Last24h {
			for _, node := range hour.ByNode {
				tot.Nodes = addSorted(tot.Nodes, node.Cluster+"/"+node.NodeName)
				for _, u := range node.ByUser {
					if u.System {
						tot.SystemUsers = addSorted(tot.SystemUsers, u.Username)
					} else {
						tot.NonSystemUsers = addSorted(tot.NonSystemUsers, u.Username)
					}
					for _, v := range u.ByVerb {
						key := clientVerb{API: item.Metadata.Name, User: u.Username, UserAgent: u.UserAgent, Verb: v.Verb}
						c := got.byClient[key]
						got.byClient[key] = counts{c.Requests + v.RequestCount, c.DryRuns + v.DryRunCount}
					}
				}
			}
		}
		for _, cw := range st.Workloads {
			if cw.Workload != nil {
				for _, p := range cw.Workload.Pods {
					got.workloads[cw.Username] = addSorted(got.workloads[cw.Username], p.Name+"@"+p.Node)
				}
			}
		}
		got.byAPI[item.Metadata.Name] = tot
	}
	return got
}

// mustEqual fails the test unless every count Sunset serves equals the
// audit log's, and logs the totals compared.
func (s *sunsetServer) mustEqual(t *testing.T, truth tally) {
	t.Helper()
	got := sunsetTally(t, s.list(t))
	problems := slices.Concat(
		diff("requests of", truth.byClient, got.byClient),
		diff("totals of", truth.byAPI, got.byAPI),
		diff("pods behind", truth.workloads, got.workloads),
	)
	if len(problems) > 0 {
		t.Fatalf("Sunset differs from the apiserver's audit log:\n%s", strings.Join(problems, "\n"))
	}
	var total, dry int64
	for _, c := range truth.byClient {
		total += c.Requests
		dry += c.DryRuns
	}
	t.Logf("Sunset equals the audit log: %d deprecated requests (%d dry runs) over %d APIs and %d clients",
		total, dry, len(truth.byAPI), len(truth.byClient))
}

// diff lists every difference between want and got, one per line.
func diff[K comparable, V any](what string, want, got map[K]V) []string {
	var out []string
	for k, w := range want {
		if g, ok := got[k]; !ok || !reflect.DeepEqual(g, w) {
			out = append(out, fmt.Sprintf("%s %+v: audit log %+v, Sunset %+v", what, k, w, g))
		}
	}
	for k, g := range got {
		if _, ok := want[k]; !ok {
			out = append(out, fmt.Sprintf("%s %+v: not in the audit log, Sunset %+v", what, k, g))
		}
	}
	slices.Sort(out)
	return out
}
