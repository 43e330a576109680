package api

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"encoding/json"
	"net/http"
	"net/http/httptest"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/rs/zerolog"

	sunsetv1 "github.com/kube-sunset/sunset/api/v1"
	"github.com/kube-sunset/sunset/countkey"
	"github.com/kube-sunset/sunset/internal/testutil/ingesttest"
	"github.com/kube-sunset/sunset/internal/testutil/storetest"
	"github.com/kube-sunset/sunset/store"
)

// FuzzQueryParameters sends arbitrary query strings to the real read API
// over a real store: every answer is a 200 with JSON or an error Status,
// never a panic or a 500, and parameters that parse encode back to the
// same query. Seeded with the parameters the README and the CLI use.
func FuzzQueryParameters(f *testing.F) {
	for _, seed := range []string{
		"", "users=5&cluster=prod", "users=0", "users=101", "since=168h", "since=30m", "since=8760h",
		"removedRelease=1.37", "removedBefore=1.38", "removedRelease=v1.37.2", "state=removed", "state=deprecated", "state=gone",
		"user=system:serviceaccount:ci:deployer&since=168h", "user=bob&users=2", "cluster=default&since=48h&users=100",
		"dryRun=All", "users=1&users=2", "since=%zz", "removedBefore=soon", "cluster=%00",
	} {
		f.Add(seed)
	}
	now := ingesttest.CapturedNow
	st, err := store.Open(store.Options{Dir: f.TempDir(), Logger: zerolog.Nop(), Now: func() time.Time { return now }})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { _ = st.Close() })
	var reqs []countkey.Request
	for i, u := range []string{"alice", "bob", "system:apiserver", "system:serviceaccount:ci:deployer"} {
		for h := range 3 {
			reqs = append(reqs, countkey.Request{ID: u + string(rune('a'+h)), RemovedRelease: "1.37",
				Key: countkey.CountKey{Cluster: []string{"default", "prod"}[i%2], API: "volumeattributesclasses.v1beta1.storage.k8s.io",
					Cell: countkey.Cell{Hour: now.Add(-time.Duration(h*30) * time.Hour).Truncate(time.Hour), Node: "master-0", Username: u,
						UserAgent: "kubectl/v1.32.4", Verb: "get"}, Removed: h == 2}})
		}
	}
	if _, err := storetest.Apply(st, reqs); err != nil {
		f.Fatal(err)
	}
	const retention = 30 * 24 * time.Hour
	mux := http.NewServeMux()
	New(Options{Querier: st, Logger: zerolog.Nop(), Now: func() time.Time { return now }, Retention: retention}).Register(mux)

	f.Fuzz(func(t *testing.T, raw string) {
		for _, path := range []string{basePath, basePath + "/volumeattributesclasses.v1beta1.storage.k8s.io", fieldsPath} {
			req, err := http.NewRequest(http.MethodGet, path+"?"+raw, nil)
			if err != nil {
				return // not a URL a client could send
			}
			rec := httptest.NewRecorder()
			mux.ServeHTTP(rec, req)
			switch rec.Code {
			case http.StatusOK:
				if !json.Valid(rec.Body.Bytes()) {
					t.Fatalf("GET %s: 200 with a body that is not JSON", req.URL)
				}
			case http.StatusBadRequest, http.StatusNotFound:
				var s metav1.Status
				if err := json.Unmarshal(rec.Body.Bytes(), &s); err != nil || s.Kind != "Status" || int(s.Code) != rec.Code || s.Message == "" {
					t.Fatalf("GET %s: %d with %s", req.URL, rec.Code, rec.Body)
				}
			default:
				t.Fatalf("GET %s: %d %s", req.URL, rec.Code, rec.Body)
			}
		}

		// What parses encodes back to the same query.
		req, _ := http.NewRequest(http.MethodGet, basePath+"?"+raw, nil)
		q, err := ParseQuery(req.URL.Query(), listParams, retention)
		if err != nil {
			return
		}
		again, err := ParseQuery(q.Values(), listParams, retention)
		if err != nil {
			t.Fatalf("%+v encodes to %q, which does not parse: %v", q, q.Values().Encode(), err)
		}
		if !reflect.DeepEqual(q, again) {
			t.Fatalf("%+v encodes to %q, which parses to %+v", q, q.Values().Encode(), again)
		}
		if q.Users < 1 || q.Users > sunsetv1.MaxUsersToReport || !slices.Contains([]string{"", sunsetv1.StateDeprecated, sunsetv1.StateRemoved}, q.State) {
			t.Fatalf("accepted out of range: %+v", q)
		}
	})
}
