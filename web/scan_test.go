package web_test

import (
	"bytes"
	"compress/gzip"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	sunsetv1 "github.com/kube-sunset/sunset/api/v1"
	"github.com/kube-sunset/sunset/internal/testutil/testserver"
)

// fakeCluster is the part of a kube-apiserver a cluster scan reads: its
// version and the lists of scan.ClusterReads. It answers them from what
// it holds, and refuses the lists refused names as kube-apiserver refuses
// a service account its RBAC does not allow.
type fakeCluster struct {
	namespaces []string
	// releases are Helm's release records, kept in Secrets (Helm's
	// default storage).
	releases          []helmRecord
	crds, apiServices []map[string]any
	// refused are the lists answered 403: "secrets" cluster-wide,
	// "secrets/vault" in a namespace.
	refused map[string]bool

	mu   sync.Mutex
	read []string
}

// helmRecord is the deployed revision of a Helm release.
type helmRecord struct {
	namespace, name string
	revision        int
	// manifest is what its templates rendered, each under "# Source:".
	manifest string
	// data, when set, is the record's data as is, instead of the gzipped
	// and base64-encoded release Helm writes.
	data string
}

// serve runs the cluster and points KUBECONFIG at it: the server's
// cluster scan reads it outside a pod that way, as `sunset serve` does.
func (c *fakeCluster) serve(t *testing.T) {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c.mu.Lock()
		c.read = append(c.read, r.URL.Path)
		c.mu.Unlock()
		reply := func(code int, v any) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(code)
			_ = json.NewEncoder(w).Encode(v)
		}
		list := func(apiVersion, kind string, items []map[string]any) {
			if items == nil {
				items = []map[string]any{}
			}
			reply(http.StatusOK, map[string]any{"apiVersion": apiVersion, "kind": kind, "metadata": map[string]any{}, "items": items})
		}
		if r.URL.Path == "/version" {
			reply(http.StatusOK, map[string]string{"major": "1", "minor": "36", "gitVersion": "v1.36.3", "platform": "linux/amd64"})
			return
		}
		resource, namespace := "", ""
		switch p := r.URL.Path; {
		case strings.HasPrefix(p, "/api/v1/namespaces/"):
			namespace, resource, _ = strings.Cut(strings.TrimPrefix(p, "/api/v1/namespaces/"), "/")
		case strings.HasPrefix(p, "/api/v1/"):
			resource = strings.TrimPrefix(p, "/api/v1/")
		case p == "/apis/apiextensions.k8s.io/v1/customresourcedefinitions":
			resource = "customresourcedefinitions"
		case p == "/apis/apiregistration.k8s.io/v1/apiservices":
			resource = "apiservices"
		}
		key := resource
		if namespace != "" {
			key += "/" + namespace
		}
		if c.refused[key] {
			where := "at the cluster scope"
			if namespace != "" {
				where = fmt.Sprintf("in the namespace %q", namespace)
			}
			group := map[string]string{"apiservices": "apiregistration.k8s.io", "customresourcedefinitions": "apiextensions.k8s.io"}[resource]
			name := resource
			if group != "" {
				name += "." + group
			}
			reply(http.StatusForbidden, map[string]any{"kind": "Status", "apiVersion": "v1", "metadata": map[string]any{}, "status": "Failure",
				"message": fmt.Sprintf(`%s is forbidden: User "system:serviceaccount:sunset:sunset" cannot list resource %q in API group %q %s`, name, resource, group, where),
				"reason":  "Forbidden", "details": map[string]any{"kind": resource}, "code": http.StatusForbidden})
			return
		}
		switch resource {
		case "namespaces":
			var items []map[string]any
			for _, ns := range c.namespaces {
				items = append(items, map[string]any{"metadata": map[string]any{"name": ns}})
			}
			list("v1", "NamespaceList", items)
		case "secrets", "configmaps":
			if sel := r.URL.Query().Get("labelSelector"); sel != "owner=helm,status=deployed" {
				t.Errorf("%s listed with labelSelector %q", r.URL.Path, sel)
			}
			var items []map[string]any
			for _, rec := range c.releases {
				if resource == "secrets" && (namespace == "" || namespace == rec.namespace) {
					items = append(items, rec.secret(t))
				}
			}
			list("v1", map[string]string{"secrets": "SecretList", "configmaps": "ConfigMapList"}[resource], items)
		case "customresourcedefinitions":
			list("apiextensions.k8s.io/v1", "CustomResourceDefinitionList", c.crds)
		case "apiservices":
			list("apiregistration.k8s.io/v1", "APIServiceList", c.apiServices)
		default:
			t.Errorf("the cluster scan read %s, which the fake cluster does not serve", r.URL.Path)
			reply(http.StatusNotFound, map[string]any{"kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": "NotFound", "code": http.StatusNotFound})
		}
	}))
	t.Cleanup(srv.Close)
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	require.NoError(t, os.WriteFile(kubeconfig, []byte(`apiVersion: v1
kind: Config
clusters:
- name: fake
  cluster:
    server: `+srv.URL+`
users:
- name: sunset
  user: {}
contexts:
- name: fake
  context:
    cluster: fake
    user: sunset
current-context: fake
`), 0o600))
	t.Setenv("KUBECONFIG", kubeconfig)
}

// secret is the record as Helm's Secret driver stores it: labelled, its
// release gzipped JSON in base64.
func (rec helmRecord) secret(t *testing.T) map[string]any {
	data := rec.data
	if data == "" {
		var gz bytes.Buffer
		zw := gzip.NewWriter(&gz)
		require.NoError(t, json.NewEncoder(zw).Encode(map[string]any{"name": rec.name, "namespace": rec.namespace, "version": rec.revision,
			"info": map[string]any{"status": "deployed"}, "manifest": rec.manifest}))
		require.NoError(t, zw.Close())
		data = base64.StdEncoding.EncodeToString(gz.Bytes())
	}
	rev := strconv.Itoa(rec.revision)
	return map[string]any{"apiVersion": "v1", "kind": "Secret", "type": "helm.sh/release.v1",
		"metadata": map[string]any{"name": "sh.helm.release.v1." + rec.name + ".v" + rev, "namespace": rec.namespace,
			"labels": map[string]string{"owner": "helm", "status": "deployed", "name": rec.name, "version": rev}},
		"data": map[string][]byte{"release": []byte(data)}}
}

// startScanned runs Sunset with scan.interval set against c, and waits
// for its first cluster scan.
func startScanned(t *testing.T, c *fakeCluster, filled bool) *server {
	t.Helper()
	c.serve(t)
	cfg := testserver.Config(t)
	cfg.Scan.Interval = time.Hour
	s := start(t, cfg)
	if filled {
		s.fill()
	}
	scanned := func() bool {
		code, _, body := s.get("/apis/sunset.dev/v1/upgradechecks/1.37")
		var check sunsetv1.UpgradeCheck
		return code == http.StatusOK && json.Unmarshal(body, &check) == nil && check.Status.Scan != nil
	}
	s.ts.Await(30*time.Second, scanned)
	require.True(t, scanned(), "no cluster scan in 30s")
	return s
}

// apiService is an APIService for group/version, kube-apiserver's own
// when automanaged.
func apiService(group, version string, automanaged bool) map[string]any {
	labels := map[string]string{}
	if automanaged {
		labels["kube-aggregator.kubernetes.io/automanaged"] = "onstart"
	}
	return map[string]any{"apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService",
		"metadata": map[string]any{"name": version + "." + group, "labels": labels},
		"spec":     map[string]any{"group": group, "version": version, "groupPriorityMinimum": 1000, "versionPriority": 15}}
}

// scanCard is what the verdict card shows of the cluster scan.
type scanCard struct {
	Class, ExitCode, Message, ScanVerdict, Scanned, Summary string
	// Findings are "object|text|origin", NotScanned "key|text".
	Findings, NotScanned []string
	Present              bool
}

const readScanCard = `(() => {
	const card = document.getElementById('verdict'), part = document.getElementById('verdict-scan');
	const text = (sel) => { const e = part && part.querySelector(sel); return e ? e.textContent : ''; };
	return {
		Class: card.className, ExitCode: card.dataset.exitCode, Message: card.querySelector('[data-verdict]').textContent,
		Present: part !== null, ScanVerdict: text('[data-scan-verdict]'), Scanned: text('[data-scanned]'), Summary: text('summary'),
		Findings: part ? [...part.querySelectorAll('li[data-scan-finding]')].map(li => li.dataset.scanFinding + '|' + li.textContent + '|' +
			li.querySelector('[data-origin]').textContent) : [],
		NotScanned: part ? [...part.querySelectorAll('#verdict-not-scanned li')].map(li => (li.dataset.notScanned || li.dataset.scanError) + '|' + li.textContent) : [],
	};
})()`

// The verdict card shows the server's cluster scan beside the traffic:
// the objects that break or use deprecated APIs at the target, where
// each comes from, the scan's verdict, and what it could not read; the
// card is as red, amber or green as both together. The cluster is a
// fake kube-apiserver the server's real scan reads through KUBECONFIG.
func TestVerdictShowsClusterScan(t *testing.T) {
	if testing.Short() {
		t.Skip("starts chromium")
	}
	b := startBrowser(t)
	out := artifacts(t)
	since := url.Values{"since": {"720h"}}

	// A Helm release with a VolumeAttributesClass removed in 1.37 and
	// deprecated Endpoints, a CRD that still stores a version it no
	// longer serves and one it marks deprecated, an APIService for a
	// group version removed in 1.38 (and kube-apiserver's own one for a
	// removed version, which is left out), and a namespace whose Helm
	// records the service account may not list.
	c := &fakeCluster{
		namespaces: []string{"ci", "kube-system", "vault"},
		refused:    map[string]bool{"secrets": true, "secrets/vault": true, "configmaps": true, "configmaps/vault": true},
		releases: []helmRecord{{namespace: "ci", name: "deployer", revision: 3, manifest: `---
# Source: deployer/templates/endpoints.yaml
apiVersion: v1
kind: Endpoints
metadata:
  name: legacy-db
  namespace: ci
subsets: []
---
# Source: deployer/templates/volumeattributesclass.yaml
apiVersion: storage.k8s.io/v1beta1
kind: VolumeAttributesClass
metadata:
  name: fast
driverName: csi.example.com
parameters:
  iops: "3000"
---
# Source: deployer/templates/cronjob.yaml
apiVersion: batch/v1
kind: CronJob
metadata:
  name: deployer
  namespace: ci
spec:
  schedule: "0 3 * * *"
  jobTemplate:
    spec:
      template:
        spec:
          restartPolicy: Never
          containers:
          - name: deploy
            image: registry.example.com/deployer:1.4
`}},
		crds: []map[string]any{{"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
			"metadata": map[string]any{"name": "widgets.e2e.example.com"},
			"spec": map[string]any{"group": "e2e.example.com", "scope": "Namespaced",
				"names": map[string]any{"kind": "Widget", "plural": "widgets", "singular": "widget", "listKind": "WidgetList"},
				"versions": []map[string]any{
					{"name": "v1beta1", "served": true, "storage": false, "deprecated": true},
					{"name": "v1", "served": true, "storage": true},
				}},
			"status": map[string]any{"storedVersions": []string{"v1alpha1", "v1beta1", "v1"}}}},
		apiServices: []map[string]any{apiService("resource.k8s.io", "v1beta1", false), apiService("coordination.k8s.io", "v1beta1", true), apiService("apps", "v1", true)},
	}
	s := startScanned(t, c, true)
	fr := newFront(t, s.url, "/sunset")
	tb := b.newTab(1280, 900, "light", false)
	require.Equal(t, "ready", tb.open(fr.url+"/"))
	var card scanCard
	tb.mustEval(readScanCard, &card)

	// What the page shows is the API's check: the scan joined at 1.37, the
	// default target (the first release that breaks a client or an
	// object).
	check := apiJSON[sunsetv1.UpgradeCheck](s, "upgradechecks/1.37", since)
	res := check.Status.Scan
	require.NotNil(t, res)
	require.Equal(t, "card verdict bad", card.Class)
	require.Equal(t, "3", card.ExitCode)
	require.Equal(t, check.Status.Message, card.Message)
	require.Equal(t, "NOT SAFE to upgrade to 1.37: 3 APIs removed in or before 1.37 were requested in the last 720h, system users excluded.", card.Message)
	require.True(t, card.Present)
	require.Equal(t, check.Status.ScanVerdict, card.ScanVerdict)
	require.Equal(t, "NOT SAFE to upgrade to 1.37: 2 objects use APIs removed in or before 1.37.", card.ScanVerdict)
	require.Len(t, res.Findings, 5)
	var objects []string
	for _, f := range res.Findings {
		name := f.Name
		if f.Namespace != "" {
			name = f.Namespace + "/" + name
		}
		objects = append(objects, f.APIVersion+" "+f.Kind+" "+name)
	}
	var shown []string
	for _, f := range card.Findings {
		shown = append(shown, strings.SplitN(f, "|", 2)[0])
	}
	require.Equal(t, objects, shown)
	crd := func(version, why string) string {
		return "widgets.e2e.example.com still lists " + version + " in status.storedVersions (" + why + "): objects may still be stored at it. " +
			"Rewrite every Widget at the storage version v1 (a StorageVersionMigration, or `kubectl get widgets.e2e.example.com -A -o json | kubectl replace -f -`), " +
			"then `kubectl patch crd widgets.e2e.example.com --subresource=status --type=merge -p '{\"status\":{\"storedVersions\":[\"v1\"]}}'`, before removing " + version + " from the CRD"
	}
	require.Equal(t, []string{
		"e2e.example.com/v1alpha1 Widget widgets.e2e.example.com|" +
			"Breaks: CRD widgets.e2e.example.com, stored version e2e.example.com/v1alpha1 — " + crd("v1alpha1", "no longer served") + ". CRD stored version: customresourcedefinitions/widgets.e2e.example.com|" +
			"CRD stored version: customresourcedefinitions/widgets.e2e.example.com",
		"storage.k8s.io/v1beta1 VolumeAttributesClass ci/fast|" +
			"Breaks: VolumeAttributesClass ci/fast (storage.k8s.io/v1beta1) — storage.k8s.io/v1beta1 VolumeAttributesClass is deprecated in v1.34+, unavailable in v1.37+; use storage.k8s.io/v1 VolumeAttributesClass. " +
			"Helm release ci/deployer revision 3, template deployer/templates/volumeattributesclass.yaml|" +
			"Helm release ci/deployer revision 3, template deployer/templates/volumeattributesclass.yaml",
		"apiregistration.k8s.io/v1 APIService v1beta1.resource.k8s.io|" +
			"Deprecated: APIService v1beta1.resource.k8s.io (apiregistration.k8s.io/v1) — APIService v1beta1.resource.k8s.io registers resource.k8s.io/v1beta1, which Kubernetes removes in v1.38: " +
			"delete it, and move its clients to the replacement versions. APIService: apiservices/v1beta1.resource.k8s.io|" +
			"APIService: apiservices/v1beta1.resource.k8s.io",
		"e2e.example.com/v1beta1 Widget widgets.e2e.example.com|" +
			"Deprecated: CRD widgets.e2e.example.com, stored version e2e.example.com/v1beta1 — " + crd("v1beta1", "marked deprecated") + ". CRD stored version: customresourcedefinitions/widgets.e2e.example.com|" +
			"CRD stored version: customresourcedefinitions/widgets.e2e.example.com",
		"v1 Endpoints ci/legacy-db|" +
			"Deprecated: Endpoints ci/legacy-db (v1) — v1 Endpoints is deprecated in v1.33+; use discovery.k8s.io/v1 EndpointSlice. Helm release ci/deployer revision 3, template deployer/templates/endpoints.yaml|" +
			"Helm release ci/deployer revision 3, template deployer/templates/endpoints.yaml",
	}, card.Findings)
	require.Equal(t, "3 objects use deprecated APIs still served by 1.37", card.Summary)
	var gaps []string
	for _, n := range res.NotScanned {
		gaps = append(gaps, n.Resource+"/"+n.Namespace+"|Not scanned: "+n.Resource+" in namespace "+n.Namespace+" — "+n.Reason)
	}
	require.Equal(t, gaps, card.NotScanned)
	require.Equal(t, []string{
		`secrets/vault|Not scanned: secrets in namespace vault — secrets is forbidden: User "system:serviceaccount:sunset:sunset" cannot list resource "secrets" in API group "" in the namespace "vault"`,
		`configmaps/vault|Not scanned: configmaps in namespace vault — configmaps is forbidden: User "system:serviceaccount:sunset:sunset" cannot list resource "configmaps" in API group "" in the namespace "vault"`,
	}, card.NotScanned)
	require.Equal(t, "The scan read 1 Helm release, 1 CRD, 3 APIServices (3 objects).", card.Scanned)
	// The traffic's findings are still the traffic's.
	var traffic []string
	tb.mustEval(`[...document.querySelectorAll('#verdict [data-finding]')].map(li => li.dataset.finding)`, &traffic)
	var want []string
	for _, f := range check.Status.Findings {
		want = append(want, f.Name)
	}
	require.Equal(t, want, traffic)
	require.Empty(t, b.errors())
	saveScreenshotAs(t, out, "page-verdict-scan.png", tb.screenshot())

	// At 1.38 the APIService breaks too.
	require.Equal(t, "ready", tb.open(fr.url+"/?target=1.38"))
	tb.mustEval(readScanCard, &card)
	require.Equal(t, "NOT SAFE to upgrade to 1.38: 3 objects use APIs removed in or before 1.38.", card.ScanVerdict)
	require.Equal(t, apiJSON[sunsetv1.UpgradeCheck](s, "upgradechecks/1.38", since).Status.ScanVerdict, card.ScanVerdict)
	require.Len(t, card.Findings, 5)
	require.True(t, strings.HasPrefix(card.Findings[0], "apiregistration.k8s.io/v1 APIService v1beta1.resource.k8s.io|Breaks: APIService v1beta1.resource.k8s.io"), card.Findings[0])

	// A phone: the long messages wrap.
	phone := b.newTab(390, 844, "dark", true)
	require.Equal(t, "ready", phone.open(fr.url+"/"))
	var width int
	phone.mustEval(`document.documentElement.scrollWidth`, &width)
	require.Equal(t, 390, width)
	require.Empty(t, b.errors())

	// Only a deprecated object, and no traffic: the card is amber, both
	// verdicts say safe.
	c = &fakeCluster{namespaces: []string{"ci"}, releases: []helmRecord{{namespace: "ci", name: "db", revision: 1, manifest: `---
# Source: db/templates/endpoints.yaml
apiVersion: v1
kind: Endpoints
metadata:
  name: legacy-db
subsets: []
`}}}
	s = startScanned(t, c, false)
	fr = newFront(t, s.url, "/sunset")
	require.Equal(t, "ready", tb.open(fr.url+"/?target=1.37"))
	tb.mustEval(readScanCard, &card)
	check = apiJSON[sunsetv1.UpgradeCheck](s, "upgradechecks/1.37", since)
	require.Equal(t, scanCard{Class: "card verdict warn", ExitCode: "0", Present: true, Message: check.Status.Message, ScanVerdict: check.Status.ScanVerdict,
		Scanned: "The scan read 1 Helm release (1 object).", Summary: "1 object uses a deprecated API still served by 1.37",
		Findings: []string{"v1 Endpoints ci/legacy-db|Deprecated: Endpoints ci/legacy-db (v1) — v1 Endpoints is deprecated in v1.33+; use discovery.k8s.io/v1 EndpointSlice. " +
			"Helm release ci/db revision 1, template db/templates/endpoints.yaml|Helm release ci/db revision 1, template db/templates/endpoints.yaml"},
		NotScanned: []string{}}, card)
	require.Equal(t, "Safe to upgrade to 1.37: no deprecated API was requested in the last 720h, system users excluded.", card.Message)
	require.Equal(t, "Safe to upgrade to 1.37: no object uses an API removed in or before it; 1 uses deprecated APIs.", card.ScanVerdict)
	require.Empty(t, b.errors())

	// A release record that cannot be read, and APIServices the service
	// account may not list: nothing found, but the scan is incomplete, and
	// the card says what it missed.
	c = &fakeCluster{namespaces: []string{"vault"}, refused: map[string]bool{"apiservices": true},
		releases: []helmRecord{{namespace: "vault", name: "secrets-operator", revision: 2, data: "not a release"}}}
	s = startScanned(t, c, false)
	fr = newFront(t, s.url, "/sunset")
	require.Equal(t, "ready", tb.open(fr.url+"/?target=1.37"))
	tb.mustEval(readScanCard, &card)
	check = apiJSON[sunsetv1.UpgradeCheck](s, "upgradechecks/1.37", since)
	require.Len(t, check.Status.Scan.Errors, 1)
	require.Equal(t, scanCard{Class: "card verdict warn", ExitCode: "1", Present: true, Message: check.Status.Message,
		ScanVerdict: "INCOMPLETE: 1 input could not be read; fix it and scan again.", Scanned: "The scan read 1 Helm release (0 objects).", Findings: []string{},
		NotScanned: []string{
			`apiservices.apiregistration.k8s.io|Not scanned: apiservices.apiregistration.k8s.io cluster-wide — apiservices.apiregistration.k8s.io is forbidden: User "system:serviceaccount:sunset:sunset" cannot list resource "apiservices" in API group "apiregistration.k8s.io" at the cluster scope`,
			"helm release vault/secrets-operator|Not read: helm release vault/secrets-operator — " + check.Status.Scan.Errors[0].Err,
		}}, card)
	require.Equal(t, check.Status.ScanVerdict, card.ScanVerdict)
	require.Equal(t, "release record is not base64: illegal base64 data at input byte 3", check.Status.Scan.Errors[0].Err)
	require.Empty(t, b.errors())
}

// saveScreenshotAs keeps a screenshot among the test's artifacts only.
func saveScreenshotAs(t *testing.T, dir, name string, png []byte) {
	t.Helper()
	require.Equal(t, "\x89PNG\r\n\x1a\n", string(png[:8]), name)
	require.NoError(t, os.WriteFile(filepath.Join(dir, name), png, 0o644))
	t.Logf("screenshot %s", filepath.Join(dir, name))
}
