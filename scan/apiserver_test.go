package scan

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"

	"k8s.io/client-go/rest"
)

// apiserver is the part of kube-apiserver a cluster scan reads, on
// loopback: Helm's release records in Secrets, listed as kube-apiserver
// lists them (label and field selectors, limit and continue, metadata
// only when asked for PartialObjectMetadataList), and empty lists of
// everything else. A record's data is made when it is served, so that the
// test holds none of it.
type apiserver struct {
	t       *testing.T
	records []helmRecord

	mu sync.Mutex
	// dataServed counts the records served with their data, and
	// mostData the most served in one response.
	dataServed, mostData int
	// limits are the limits of the list requests that asked for
	// metadata only.
	limits []string
}

// helmRecord is one Secret labelled as a Helm release record.
type helmRecord struct {
	namespace, name string
	revision        int
	// data is the record's data (base64 of gzipped JSON, as Helm writes).
	data func() []byte
}

func (r helmRecord) object() string {
	return fmt.Sprintf("sh.helm.release.v1.%s.v%d", r.name, r.revision)
}

func (r helmRecord) meta() map[string]any {
	return map[string]any{"name": r.object(), "namespace": r.namespace,
		"labels": map[string]string{"owner": "helm", "status": "deployed", "name": r.name, "version": strconv.Itoa(r.revision)}}
}

// config serves the records and returns how to reach them.
func (a *apiserver) config() *rest.Config {
	srv := httptest.NewServer(http.HandlerFunc(a.serve))
	a.t.Cleanup(srv.Close)
	return &rest.Config{Host: srv.URL}
}

func (a *apiserver) serve(w http.ResponseWriter, r *http.Request) {
	reply := func(v any) {
		w.Header().Set("Content-Type", "application/json")
		if err := json.NewEncoder(w).Encode(v); err != nil {
			a.t.Errorf("writing %s: %v", r.URL, err)
		}
	}
	empty := func(apiVersion, kind string) {
		reply(map[string]any{"apiVersion": apiVersion, "kind": kind, "metadata": map[string]any{}, "items": []any{}})
	}
	p := r.URL.Path
	switch p {
	case "/version":
		reply(map[string]string{"major": "1", "minor": "36", "gitVersion": "v1.36.3"})
		return
	case "/apis/apiextensions.k8s.io/v1/customresourcedefinitions":
		empty("apiextensions.k8s.io/v1", "CustomResourceDefinitionList")
		return
	case "/apis/apiregistration.k8s.io/v1/apiservices":
		empty("apiregistration.k8s.io/v1", "APIServiceList")
		return
	case "/api/v1/configmaps":
		empty("v1", "ConfigMapList")
		return
	}
	namespace := ""
	if rest, ok := strings.CutPrefix(p, "/api/v1/namespaces/"); ok {
		namespace, p = rest[:strings.Index(rest, "/")], "/api/v1"+rest[strings.Index(rest, "/"):]
	}
	if p != "/api/v1/secrets" {
		a.t.Errorf("the scan read %s, which the test's apiserver does not serve", r.URL)
		w.WriteHeader(http.StatusNotFound)
		return
	}
	q := r.URL.Query()
	if q.Get("labelSelector") != "owner=helm,status=deployed" {
		a.t.Errorf("%s: listed with labelSelector %q", r.URL, q.Get("labelSelector"))
	}
	name, byName := strings.CutPrefix(q.Get("fieldSelector"), "metadata.name=")
	if !byName && q.Get("fieldSelector") != "" {
		a.t.Errorf("%s: fieldSelector %q", r.URL, q.Get("fieldSelector"))
	}
	start, _ := strconv.Atoi(q.Get("continue"))
	limit, _ := strconv.Atoi(q.Get("limit"))
	var matched []helmRecord
	for _, rec := range a.records {
		if (namespace == "" || rec.namespace == namespace) && (!byName || rec.object() == name) {
			matched = append(matched, rec)
		}
	}
	page, next := matched[min(start, len(matched)):], ""
	if limit > 0 && len(page) > limit {
		page, next = page[:limit], strconv.Itoa(start+limit)
	}
	if strings.Contains(r.Header.Get("Accept"), "as=PartialObjectMetadataList") {
		a.mu.Lock()
		a.limits = append(a.limits, q.Get("limit"))
		a.mu.Unlock()
		items := []any{}
		for _, rec := range page {
			items = append(items, map[string]any{"apiVersion": "meta.k8s.io/v1", "kind": "PartialObjectMetadata", "metadata": rec.meta()})
		}
		reply(map[string]any{"apiVersion": "meta.k8s.io/v1", "kind": "PartialObjectMetadataList", "metadata": map[string]any{"continue": next}, "items": items})
		return
	}
	a.mu.Lock()
	a.dataServed += len(page)
	a.mostData = max(a.mostData, len(page))
	a.mu.Unlock()
	// Encoded one item at a time, so that the test holds one record's data.
	w.Header().Set("Content-Type", "application/json")
	fmt.Fprintf(w, `{"apiVersion":"v1","kind":"SecretList","metadata":{"continue":%q},"items":[`, next)
	for i, rec := range page {
		if i > 0 {
			_, _ = w.Write([]byte(","))
		}
		b, err := json.Marshal(map[string]any{"metadata": rec.meta(), "type": "helm.sh/release.v1", "data": map[string][]byte{"release": rec.data()}})
		if err != nil {
			a.t.Error(err)
		}
		_, _ = w.Write(b)
	}
	_, _ = w.Write([]byte("]}"))
}
