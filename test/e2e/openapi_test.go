package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	apidiscoveryv2 "k8s.io/api/apidiscovery/v2"
)

// aggregatedSunset is Sunset serving sunset.dev/v1 through kube-apiserver, set up
// as TestAggregatedAPIThroughKubeAPIServer sets it up: the front-proxy
// flags, the shipped RBAC and APIService, delegated authentication and
// authorization.
type aggregatedSunset struct {
	a      *apiserver
	pki    *pki
	sunset *sunsetServer
	// admin is a kubeconfig for a member of system:masters.
	admin string
}

// startAggregated starts etcd, kube-apiserver (with extra flags) and
// Sunset, and waits for the APIService to be available.
func startAggregated(t *testing.T, extraAPIServerFlags ...string) *aggregatedSunset {
	t.Helper()
	sunsetBin, apiserverBin, etcdBin := peerBinaries(t)
	p := newPKI(t)
	token := randomToken(t)
	port := freePort(t)
	sunsetURL := "https://127.0.0.1:" + strconv.Itoa(port)
	a := startAPIServer(t, apiserverBin, startEtcd(t, etcdBin, p), p,
		webhookKubeconfig(t, p, sunsetURL+"/audit/webhook/"+clusterName+"/"+nodeName, token),
		append(frontProxyFlags(t), extraAPIServerFlags...)...,
	)
	ctx := ctxWithin(t, 5*time.Minute)
	s := serveAggregated(ctx, t, a, a.as(t, "admin", "e2e-setup/1.0"), p, sunsetBin, token, port)
	return &aggregatedSunset{a: a, pki: p, sunset: s, admin: userKubeconfig(t, a, "admin", a.tokens["admin"])}
}

// kubectlWith runs kubectl with a kubeconfig, returning its output, or its
// error output with the error.
func kubectlWith(t *testing.T, kubeconfig string, args ...string) (string, error) {
	t.Helper()
	bin := kubectlBinary(t)
	cmd := exec.Command(bin, append([]string{"--kubeconfig=" + kubeconfig}, args...)...)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil {
		return errOut.String(), err
	}
	return out.String(), nil
}

// fieldDoc is the doc comment of a field of a type in ../../api/v1, as gofmt
// leaves it: the text kubectl explain must show.
func fieldDoc(t *testing.T, typeName, fieldName string) string {
	t.Helper()
	pkgs, err := parser.ParseDir(token.NewFileSet(), "../../api/v1", func(fi os.FileInfo) bool { return !strings.HasSuffix(fi.Name(), "_test.go") }, parser.ParseComments)
	must(t, "parsing ../../api/v1", err)
	for _, pkg := range pkgs {
		for _, f := range pkg.Files {
			for _, decl := range f.Decls {
				gen, ok := decl.(*ast.GenDecl)
				if !ok {
					continue
				}
				for _, spec := range gen.Specs {
					ts, ok := spec.(*ast.TypeSpec)
					if !ok || ts.Name.Name != typeName {
						continue
					}
					for _, field := range ts.Type.(*ast.StructType).Fields.List {
						if len(field.Names) == 1 && field.Names[0].Name == fieldName {
							return field.Doc.Text()
						}
					}
				}
			}
		}
	}
	t.Fatalf("../../api/v1 declares no field %s.%s", typeName, fieldName)
	return ""
}

// words is text with its runs of white space made single spaces, so
// kubectl's wrapping does not matter.
func words(s string) string { return strings.Join(strings.Fields(s), " ") }

// Through kube-apiserver, `kubectl explain` shows sunset.dev/v1's fields
// with the Go doc comments as descriptions, from the OpenAPI v3 and v2
// documents kube-apiserver's aggregator downloaded from Sunset with its own
// identity (system:aggregator, no extra RBAC); kube-apiserver's aggregated
// discovery lists sunset.dev/v1 from Sunset's aggregated discovery
// document, not from the legacy documents it falls back to.
func TestOpenAPIAndAggregatedDiscoveryThroughKubeAPIServer(t *testing.T) {
	// -v=3 makes the aggregator log which discovery document it read.
	agg := startAggregated(t, "-v=3")

	last24h := words(fieldDoc(t, "APIRequestCountStatus", "Last24h"))
	if last24h != "Last24h has 24 entries indexed by UTC hour of day: index 0 is 00:00-00:59. It covers the current hour and the 23 before it." {
		t.Fatalf("the doc comment of APIRequestCountStatus.Last24h changed to %q: update this test's expectations", last24h)
	}
	byNode := words(fieldDoc(t, "PerResourceAPIRequestLog", "ByNode"))
	// kubectl explain reads OpenAPI v3 by default, and v2 when asked.
	for output, want := range map[string][]string{
		"plaintext": {"GROUP: sunset.dev", "KIND: APIRequestCount", "VERSION: v1",
			"FIELD: last24h <[]PerResourceAPIRequestLog>", "DESCRIPTION: " + last24h,
			"byNode <[]PerNodeAPIRequestLog> -required- " + byNode},
		"plaintext-openapiv2": {"KIND: APIRequestCount", "VERSION: sunset.dev/v1",
			"RESOURCE: last24h <[]Object>", "DESCRIPTION: " + last24h,
			"byNode <[]Object> -required- " + byNode},
	} {
		var out string
		waitFor(t, "kubectl explain --output="+output, 2*time.Minute, func() error {
			var err error
			out, err = kubectlWith(t, agg.admin, "explain", "apirequestcounts.sunset.dev.status.last24h", "--output="+output)
			if err != nil {
				return fmt.Errorf("%v: %s", err, out)
			}
			return nil
		})
		for _, w := range want {
			if !strings.Contains(words(out), w) {
				t.Errorf("kubectl explain --output=%s lacks %q:\n%s", output, w, out)
			}
		}
	}
	out, err := kubectlWith(t, agg.admin, "explain", "webhookcounts.sunset.dev.status.requestCount")
	must(t, "kubectl explain webhookcounts: "+out, err)
	if want := words(fieldDoc(t, "WebhookCounts", "RequestCount")); !strings.Contains(words(out), "DESCRIPTION: "+want) {
		t.Errorf("kubectl explain webhookcounts.sunset.dev.status.requestCount: the embedded counts' field lacks %q:\n%s", want, out)
	}

	// kube-apiserver's own aggregated discovery lists sunset.dev/v1 with
	// every resource Sunset's discovery has.
	want := []string{"apirequestcounts get,list,delete Cluster", "fieldrequestcounts get,list Cluster", "webhookcounts get,list Cluster", "upgradechecks get,list Cluster"}
	waitFor(t, "kube-apiserver's aggregated discovery to list sunset.dev/v1", time.Minute, func() error {
		req, err := http.NewRequest(http.MethodGet, agg.a.url+"/apis", nil)
		must(t, "request", err)
		req.Header.Set("Accept", "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList")
		req.Header.Set("Authorization", "Bearer "+agg.a.tokens["admin"])
		resp, err := agg.pki.httpsClient().Do(req)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		var list apidiscoveryv2.APIGroupDiscoveryList
		if err := json.NewDecoder(resp.Body).Decode(&list); err != nil {
			return fmt.Errorf("decoding kube-apiserver's aggregated discovery: %w", err)
		}
		var got []string
		for _, g := range list.Items {
			for _, v := range g.Versions {
				if g.Name != "sunset.dev" {
					continue
				}
				got = append(got, fmt.Sprintf("version %s, %s", v.Version, v.Freshness))
				for _, r := range v.Resources {
					got = append(got, r.Resource+" "+strings.Join(r.Verbs, ",")+" "+string(r.Scope))
				}
			}
		}
		if !slices.Equal(got, append([]string{"version v1, Current"}, want...)) {
			return fmt.Errorf("sunset.dev: %q", got)
		}
		return nil
	})

	// kubectl get, which sends limit=500 to a list, works through
	// kube-apiserver for every resource discovery lists.
	for _, w := range want {
		resource, _, _ := strings.Cut(w, " ")
		out, err := kubectlWith(t, agg.admin, "get", resource+".sunset.dev")
		must(t, "kubectl get "+resource+".sunset.dev: "+out, err)
	}

	// The aggregator read Sunset's aggregated discovery document, as its
	// log says. Its first attempts may race Sunset's Service and delegated
	// authorization on a loaded machine, and it retries those; once it has
	// read the aggregated document, it must never fall back to the legacy
	// documents.
	service := fmt.Sprintf("%s/%s:%d", sunsetNamespace, sunsetAccount, agg.sunset.port(t))
	log, err := os.ReadFile(agg.a.proc.log)
	must(t, "reading kube-apiserver's log", err)
	var downloaded bool
	for _, line := range strings.Split(string(log), "\n") {
		switch {
		case strings.Contains(line, "Successfully downloaded discovery for "+service):
			downloaded = true
		case strings.Contains(line, "failed to download v1.sunset.dev"),
			strings.Contains(line, `loading OpenAPI spec for "v1.sunset.dev" failed`):
			// kubectl explain above read both documents through the
			// aggregator, so it retried these to success.
			t.Logf("kube-apiserver logged, and then loaded the OpenAPI: %s", line)
		case strings.Contains(line, "legacy discovery for "+service):
			if downloaded {
				t.Errorf("after reading the aggregated discovery, kube-apiserver logged: %s", line)
			} else {
				t.Logf("before its first aggregated discovery, kube-apiserver logged: %s", line)
			}
		}
	}
	if !downloaded {
		t.Errorf("kube-apiserver never logged that it downloaded the aggregated discovery of %s", service)
	}
}

// port is the port Sunset listens on.
func (s *sunsetServer) port(t *testing.T) int {
	t.Helper()
	_, p, ok := strings.Cut(strings.TrimPrefix(s.url, "https://"), ":")
	n, err := strconv.Atoi(p)
	if !ok || err != nil {
		t.Fatalf("no port in %s", s.url)
	}
	return n
}
