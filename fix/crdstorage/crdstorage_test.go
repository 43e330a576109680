package crdstorage

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
)

// apiserver is a loopback HTTP server speaking the part of the Kubernetes
// API a migration uses, for one CRD (widgets.example.com, storage v1) and
// its objects, so that conflicts and refusals happen on cue.
type apiserver struct {
	mu sync.Mutex
	// stored is status.storedVersions; crdRV the CRD's resourceVersion.
	stored []string
	crdRV  int
	// objects by name, each with its resourceVersion.
	objects map[string]int
	// conflicts is how many more updates of an object answer 409.
	conflicts map[string]int
	// refuse answers an update of an object with this status.
	refuse map[string]*apierrors.StatusError
	// statusConflicts is how many more status updates answer 409.
	statusConflicts int
	// bumpStoredOnGet, when set, becomes storedVersions at the next read
	// of the CRD: a change made during the migration.
	bumpStoredOnGet []string
	updates         map[string]int
	gets            int
	// migrations is the storagemigration.k8s.io side (svm_test.go).
	migrations migrations
	host       string
}

func newAPIServer(t *testing.T, objects int) (*apiserver, dynamic.Interface) {
	t.Helper()
	a := &apiserver{stored: []string{"v1beta1", "v1"}, crdRV: 1, objects: map[string]int{}, conflicts: map[string]int{},
		refuse: map[string]*apierrors.StatusError{}, updates: map[string]int{}}
	for i := range objects {
		a.objects[fmt.Sprintf("w%02d", i)] = 1
	}
	srv := httptest.NewServer(a)
	t.Cleanup(srv.Close)
	a.host = srv.URL
	dyn, err := dynamic.NewForConfig(&rest.Config{Host: srv.URL})
	require.NoError(t, err)
	return a, dyn
}

const (
	crdPath     = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/widgets.example.com"
	objectsPath = "/apis/example.com/v1/namespaces/ns/widgets"
	listPath    = "/apis/example.com/v1/widgets"
)

func (a *apiserver) crd() map[string]any {
	return map[string]any{"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
		"metadata": map[string]any{"name": "widgets.example.com", "resourceVersion": fmt.Sprint(a.crdRV)},
		"spec": map[string]any{"group": "example.com", "names": map[string]any{"plural": "widgets", "kind": "Widget"},
			"versions": []any{map[string]any{"name": "v1beta1", "served": true, "storage": false}, map[string]any{"name": "v1", "served": true, "storage": true}}},
		"status": map[string]any{"storedVersions": a.stored}}
}

func (a *apiserver) object(name string) map[string]any {
	return map[string]any{"apiVersion": "example.com/v1", "kind": "Widget",
		"metadata": map[string]any{"name": name, "namespace": "ns", "resourceVersion": fmt.Sprint(a.objects[name])}}
}

func (a *apiserver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	a.mu.Lock()
	defer a.mu.Unlock()
	var body map[string]any
	if r.Body != nil {
		raw, _ := io.ReadAll(r.Body)
		_ = json.Unmarshal(raw, &body)
	}
	rv := func() string {
		m, _ := body["metadata"].(map[string]any)
		s, _ := m["resourceVersion"].(string)
		return s
	}
	switch {
	case r.Method == http.MethodGet && r.URL.Path == crdPath:
		a.gets++
		if a.bumpStoredOnGet != nil {
			a.stored, a.bumpStoredOnGet = a.bumpStoredOnGet, nil
			a.crdRV++
		}
		writeJSON(w, http.StatusOK, a.crd())
	case r.Method == http.MethodPut && r.URL.Path == crdPath+"/status":
		status, _ := body["status"].(map[string]any)
		if a.statusConflicts > 0 || rv() != fmt.Sprint(a.crdRV) {
			a.statusConflicts--
			a.crdRV++
			writeStatus(w, apierrors.NewConflict(schema.GroupResource{Group: "apiextensions.k8s.io", Resource: "customresourcedefinitions"}, "widgets.example.com", errors.New("the object has been modified")))
			return
		}
		a.stored = nil
		for _, v := range status["storedVersions"].([]any) {
			a.stored = append(a.stored, v.(string))
		}
		a.crdRV++
		writeJSON(w, http.StatusOK, a.crd())
	case r.Method == http.MethodGet && r.URL.Path == listPath:
		var items []any
		for i := range len(a.objects) {
			items = append(items, a.object(fmt.Sprintf("w%02d", i)))
		}
		writeJSON(w, http.StatusOK, map[string]any{"apiVersion": "example.com/v1", "kind": "WidgetList", "metadata": map[string]any{}, "items": items})
	case strings.HasPrefix(r.URL.Path, objectsPath+"/"):
		name := strings.TrimPrefix(r.URL.Path, objectsPath+"/")
		if r.Method == http.MethodGet {
			writeJSON(w, http.StatusOK, a.object(name))
			return
		}
		a.updates[name]++
		if err, ok := a.refuse[name]; ok {
			writeStatus(w, err)
			return
		}
		if a.conflicts[name] > 0 || rv() != fmt.Sprint(a.objects[name]) {
			a.conflicts[name]--
			a.objects[name]++
			writeStatus(w, apierrors.NewConflict(schema.GroupResource{Group: "example.com", Resource: "widgets"}, name, errors.New("the object has been modified")))
			return
		}
		a.objects[name]++
		writeJSON(w, http.StatusOK, a.object(name))
	default:
		if !a.serveMigrations(w, r, body) {
			writeStatus(w, apierrors.NewNotFound(schema.GroupResource{}, r.URL.Path))
		}
	}
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

func writeStatus(w http.ResponseWriter, err *apierrors.StatusError) {
	s := err.Status()
	s.Kind, s.APIVersion = "Status", "v1"
	writeJSON(w, int(s.Code), s)
}

func TestMigrateRetriesConflictsThenTrims(t *testing.T) {
	a, dyn := newAPIServer(t, 3)
	a.conflicts["w01"] = 2
	a.statusConflicts = 1
	var progress []Progress
	m := &Migrator{Dynamic: dyn, Progress: func(p Progress) { progress = append(progress, p) }}
	res, err := m.Migrate(t.Context(), "widgets.example.com")
	require.NoError(t, err)
	require.Equal(t, Result{CRD: "widgets.example.com", Storage: "v1", Before: []string{"v1beta1", "v1"}, After: []string{"v1"}, Rewritten: 3}, res)
	require.Equal(t, []Progress{{CRD: "widgets.example.com", Storage: "v1", Rewritten: 3}}, progress)
	require.Equal(t, map[string]int{"w00": 1, "w01": 3, "w02": 1}, a.updates)
	require.Equal(t, []string{"v1"}, a.stored)
}

func TestMigrateLeavesStoredVersionsWhenAnObjectIsNotRewritten(t *testing.T) {
	a, dyn := newAPIServer(t, 3)
	a.conflicts["w00"] = maxConflicts
	a.refuse["w02"] = apierrors.NewInvalid(schema.GroupKind{Group: "example.com", Kind: "Widget"}, "w02", nil)
	res, err := (&Migrator{Dynamic: dyn}).Migrate(t.Context(), "widgets.example.com")
	require.ErrorIs(t, err, ErrIncomplete)
	require.EqualError(t, err, "CustomResourceDefinition widgets.example.com: 2 of 3 objects were not rewritten at v1, so status.storedVersions stays [v1beta1 v1]: not every object was rewritten")
	require.Equal(t, 1, res.Rewritten)
	require.Len(t, res.Failed, 2)
	require.Equal(t, `ns/w00: changed under every one of 5 rewrites: Operation cannot be fulfilled on widgets.example.com "w00": the object has been modified`, res.Failed[0].String())
	require.Equal(t, `ns/w02: Widget.example.com "w02" is invalid`, res.Failed[1].String())
	require.Equal(t, []string{"v1beta1", "v1"}, a.stored)
	require.Equal(t, 1, a.gets, "the CRD is read once, and not for a status update")
}

func TestMigrateStopsAtTheAuthorizersRefusal(t *testing.T) {
	a, dyn := newAPIServer(t, 2)
	a.refuse["w00"] = apierrors.NewForbidden(schema.GroupResource{Group: "example.com", Resource: "widgets"}, "w00",
		errors.New(`User "bob" cannot update resource "widgets" in API group "example.com" in the namespace "ns"`))
	_, err := (&Migrator{Dynamic: dyn}).Migrate(t.Context(), "widgets.example.com")
	require.EqualError(t, err, `rewriting widgets.example.com: widgets.example.com "w00" is forbidden: User "bob" cannot update resource "widgets" in API group "example.com" in the namespace "ns". `+
		`Grant update on widgets.example.com, e.g. a ClusterRole rule {apiGroups: ["example.com"], resources: ["widgets"], verbs: ["update"]}`)
	require.Equal(t, map[string]int{"w00": 1}, a.updates, "no other object is tried")
	require.Equal(t, []string{"v1beta1", "v1"}, a.stored)
}

func TestMigrateRefusesWhenTheCRDGainedAStoredVersion(t *testing.T) {
	a, dyn := newAPIServer(t, 1)
	m := &Migrator{Dynamic: dyn, Progress: func(Progress) {
		// While the objects were rewritten, something stored at v2.
		a.mu.Lock()
		a.bumpStoredOnGet = []string{"v1beta1", "v1", "v2"}
		a.mu.Unlock()
	}}
	res, err := m.Migrate(t.Context(), "widgets.example.com")
	require.EqualError(t, err, "CustomResourceDefinition widgets.example.com changed while its objects were rewritten (storage version v1, storedVersions [v1beta1 v1 v2]; at the start v1, [v1beta1 v1]): run the fix again")
	require.Equal(t, []string{"v1beta1", "v1", "v2"}, res.After)
	require.Equal(t, []string{"v1beta1", "v1", "v2"}, a.stored)
}

func TestDryRunWritesNothing(t *testing.T) {
	a, dyn := newAPIServer(t, 4)
	res, err := (&Migrator{Dynamic: dyn, DryRun: true}).Migrate(t.Context(), "widgets.example.com")
	require.NoError(t, err)
	require.Equal(t, Result{CRD: "widgets.example.com", Storage: "v1", Before: []string{"v1beta1", "v1"}, After: []string{"v1"}, Rewritten: 4}, res)
	require.Empty(t, a.updates)
	require.Equal(t, []string{"v1beta1", "v1"}, a.stored)
}

func TestUpToDateCRDIsLeftAlone(t *testing.T) {
	a, dyn := newAPIServer(t, 2)
	a.stored = []string{"v1"}
	res, err := (&Migrator{Dynamic: dyn}).Migrate(t.Context(), "widgets.example.com")
	require.NoError(t, err)
	require.True(t, res.UpToDate)
	require.Empty(t, a.updates)
}

func TestRefusedByRBAC(t *testing.T) {
	gr := schema.GroupResource{Group: "example.com", Resource: "widgets"}
	for _, tc := range []struct {
		name string
		err  error
		want bool
	}{
		{"authorizer", apierrors.NewForbidden(gr, "w", errors.New(`User "bob" cannot update resource "widgets"`)), true},
		{"admission policy", apierrors.NewForbidden(gr, "w", errors.New("ValidatingAdmissionPolicy 'p' with binding 'p' denied request: cannot touch")), false},
		{"invalid", apierrors.NewInvalid(schema.GroupKind{Group: "example.com", Kind: "Widget"}, "w", nil), false},
	} {
		t.Run(tc.name, func(t *testing.T) { require.Equal(t, tc.want, refusedByRBAC(tc.err)) })
	}
}
