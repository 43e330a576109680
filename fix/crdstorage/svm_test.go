package crdstorage

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"
)

// migrations is what the loopback apiserver keeps of
// storagemigration.k8s.io: the versions it serves, its
// StorageVersionMigrations, and a migrator acting on them.
type migrations struct {
	served  []string
	objects map[string]map[string]any
	created int
	deleted []string
	// migrate, if set, is the migrator: it sees a migration at each read
	// and may rewrite the objects and set its conditions.
	migrate func(a *apiserver, svm map[string]any)
}

const migrationsPath = "/apis/storagemigration.k8s.io/"

// serveMigrations answers discovery and the StorageVersionMigrations; it
// reports false for any other path.
func (a *apiserver) serveMigrations(w http.ResponseWriter, r *http.Request, body map[string]any) bool {
	rest, ok := strings.CutPrefix(r.URL.Path, migrationsPath)
	if !ok {
		return false
	}
	version, name, _ := strings.Cut(rest, "/")
	served := false
	for _, v := range a.migrations.served {
		served = served || v == version
	}
	if !served {
		writeStatus(w, apierrors.NewNotFound(schema.GroupResource{}, r.URL.Path))
		return true
	}
	name = strings.TrimPrefix(name, "storageversionmigrations")
	name = strings.TrimPrefix(name, "/")
	mg := &a.migrations
	switch {
	case r.Method == http.MethodGet && rest == version:
		writeJSON(w, http.StatusOK, map[string]any{"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": "storagemigration.k8s.io/" + version,
			"resources": []any{map[string]any{"name": "storageversionmigrations", "kind": "StorageVersionMigration", "namespaced": false, "verbs": []any{"create", "get", "delete"}}}})
	case r.Method == http.MethodPost && name == "":
		meta, _ := body["metadata"].(map[string]any)
		n, _ := meta["name"].(string)
		if _, exists := mg.objects[n]; exists {
			writeStatus(w, apierrors.NewAlreadyExists(schema.GroupResource{Group: migrationGroup, Resource: "storageversionmigrations"}, n))
			return true
		}
		if mg.objects == nil {
			mg.objects = map[string]map[string]any{}
		}
		mg.objects[n] = body
		mg.created++
		writeJSON(w, http.StatusCreated, body)
	case r.Method == http.MethodGet && mg.objects[name] != nil:
		if mg.migrate != nil {
			mg.migrate(a, mg.objects[name])
		}
		writeJSON(w, http.StatusOK, mg.objects[name])
	case r.Method == http.MethodDelete && mg.objects[name] != nil:
		delete(mg.objects, name)
		mg.deleted = append(mg.deleted, name)
		writeJSON(w, http.StatusOK, map[string]any{"kind": "Status", "apiVersion": "v1", "status": "Success"})
	default:
		writeStatus(w, apierrors.NewNotFound(schema.GroupResource{Group: migrationGroup, Resource: "storageversionmigrations"}, name))
	}
	return true
}

// conditioned sets a migration's one condition.
func conditioned(svm map[string]any, state, message string) {
	svm["status"] = map[string]any{"conditions": []any{map[string]any{"type": state, "status": "True", "message": message}}}
}

// migrator is a migrator that rewrites every object at once and succeeds.
func migrator(a *apiserver, svm map[string]any) {
	for name := range a.objects {
		a.objects[name]++
	}
	conditioned(svm, "Succeeded", "")
}

const svmName = "sunset-widgets.example.com-v1"

// newMigrationTest is a loopback apiserver of three widgets that serves
// the migration versions given, and a Migrator with a clock that moves 10 s
// at each reading.
func newMigrationTest(t *testing.T, served ...string) (*apiserver, *Migrator, *[]Progress) {
	t.Helper()
	a, dyn := newAPIServer(t, 3)
	a.migrations.served = served
	disc, err := discovery.NewDiscoveryClientForConfig(&rest.Config{Host: a.host})
	require.NoError(t, err)
	now := time.Unix(0, 0)
	var progress []Progress
	m := &Migrator{Dynamic: dyn, Discovery: disc, PollInterval: time.Millisecond,
		Now:      func() time.Time { now = now.Add(10 * time.Second); return now },
		Progress: func(p Progress) { progress = append(progress, p) }}
	return a, m, &progress
}

func TestMigrationRewritesThroughTheNewestVersionServed(t *testing.T) {
	for _, tc := range []struct {
		name, want string
		served     []string
	}{
		{"v1 and v1beta1", "v1", []string{"v1", "v1beta1"}},
		{"v1beta1 alone", "v1beta1", []string{"v1beta1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, m, progress := newMigrationTest(t, tc.served...)
			a.migrations.migrate = migrator
			res, err := m.Migrate(t.Context(), "widgets.example.com")
			require.NoError(t, err)
			want := "storageversionmigrations.storagemigration.k8s.io/" + svmName
			require.Equal(t, Result{CRD: "widgets.example.com", Storage: "v1", Before: []string{"v1beta1", "v1"}, After: []string{"v1"}, Migration: want}, res)
			require.Equal(t, []Progress{
				{CRD: "widgets.example.com", Storage: "v1", Migration: want},
				{CRD: "widgets.example.com", Storage: "v1", Migration: want, State: "Succeeded"},
			}, *progress)
			require.Empty(t, a.updates, "the migrator rewrote the objects, not the fix")
			require.Equal(t, []string{"v1"}, a.stored)
			svm := a.migrations.objects[svmName]
			require.Equal(t, "storagemigration.k8s.io/"+tc.want, svm["apiVersion"])
			require.Equal(t, map[string]any{"resource": map[string]any{"group": "example.com", "resource": "widgets"}}, svm["spec"])
			require.Equal(t, map[string]any{"app.kubernetes.io/managed-by": "sunset"}, svm["metadata"].(map[string]any)["labels"])
		})
	}
}

func TestMigrationNoMigratorTakesUp(t *testing.T) {
	t.Run("auto rewrites the objects itself", func(t *testing.T) {
		a, m, progress := newMigrationTest(t, "v1beta1")
		res, err := m.Migrate(t.Context(), "widgets.example.com")
		require.NoError(t, err)
		require.Equal(t, Result{CRD: "widgets.example.com", Storage: "v1", Before: []string{"v1beta1", "v1"}, After: []string{"v1"}, Rewritten: 3}, res)
		require.Equal(t, []string{svmName}, a.migrations.deleted)
		require.Equal(t, map[string]int{"w00": 1, "w01": 1, "w02": 1}, a.updates)
		require.Equal(t, []Progress{
			{CRD: "widgets.example.com", Storage: "v1", Migration: "storageversionmigrations.storagemigration.k8s.io/" + svmName},
			{CRD: "widgets.example.com", Storage: "v1", Rewritten: 3},
		}, *progress)
		require.Equal(t, []string{"v1"}, a.stored)
	})
	t.Run("migration waits no longer and leaves it", func(t *testing.T) {
		a, m, _ := newMigrationTest(t, "v1beta1")
		m.Method = MethodMigration
		_, err := m.Migrate(t.Context(), "widgets.example.com")
		require.ErrorIs(t, err, ErrNoMigrator)
		require.EqualError(t, err, "StorageVersionMigration "+svmName+": no migrator took it up in 30s (no storage version migrator): "+
			"kube-controller-manager runs one only with the StorageVersionMigrator feature gate on; it is left in place, or use --method rewrite")
		require.Contains(t, a.migrations.objects, svmName)
		require.Empty(t, a.updates)
		require.Equal(t, []string{"v1beta1", "v1"}, a.stored)
	})
	t.Run("migration on a cluster without the API", func(t *testing.T) {
		a, m, _ := newMigrationTest(t)
		m.Method = MethodMigration
		_, err := m.Migrate(t.Context(), "widgets.example.com")
		require.EqualError(t, err, "the cluster serves no storagemigration.k8s.io StorageVersionMigration (no storage version migrator): use --method rewrite or auto")
		require.Equal(t, []string{"v1beta1", "v1"}, a.stored)
	})
	t.Run("rewrite never creates one", func(t *testing.T) {
		a, m, _ := newMigrationTest(t, "v1")
		m.Method = MethodRewrite
		res, err := m.Migrate(t.Context(), "widgets.example.com")
		require.NoError(t, err)
		require.Equal(t, 3, res.Rewritten)
		require.Zero(t, a.migrations.created)
	})
}

func TestMigrationFailedLeavesStoredVersions(t *testing.T) {
	a, m, _ := newMigrationTest(t, "v1")
	a.migrations.migrate = func(_ *apiserver, svm map[string]any) {
		conditioned(svm, "Failed", "widgets w01: admission webhook denied the request")
	}
	_, err := m.Migrate(t.Context(), "widgets.example.com")
	require.EqualError(t, err, "StorageVersionMigration "+svmName+" failed: widgets w01: admission webhook denied the request; status.storedVersions is left as it was. "+
		"Fix the cause, then run the fix again (or with --method rewrite to see each object that cannot be written)")
	require.Equal(t, []string{"v1beta1", "v1"}, a.stored)
}

func TestMigrationLeftRunningIsWaitedFor(t *testing.T) {
	a, m, progress := newMigrationTest(t, "v1")
	running := map[string]any{"apiVersion": "storagemigration.k8s.io/v1", "kind": "StorageVersionMigration",
		"metadata": map[string]any{"name": svmName}}
	conditioned(running, "Running", "")
	a.migrations.objects = map[string]map[string]any{svmName: running}
	reads := 0
	a.migrations.migrate = func(a *apiserver, svm map[string]any) {
		// The first read is the run's own look for a migration left behind.
		if reads++; reads == 3 {
			migrator(a, svm)
		}
	}
	res, err := m.Migrate(t.Context(), "widgets.example.com")
	require.NoError(t, err)
	require.Zero(t, a.migrations.created, "the migration left running is not started again")
	require.Equal(t, "storageversionmigrations.storagemigration.k8s.io/"+svmName, res.Migration)
	require.Equal(t, []string{"Running", "Succeeded"}, []string{(*progress)[0].State, (*progress)[1].State})
	require.Equal(t, []string{"v1"}, a.stored)
}

func TestMigrationThatEndedIsStartedAgain(t *testing.T) {
	a, m, _ := newMigrationTest(t, "v1")
	old := map[string]any{"apiVersion": "storagemigration.k8s.io/v1", "kind": "StorageVersionMigration", "metadata": map[string]any{"name": svmName}}
	conditioned(old, "Succeeded", "")
	a.migrations.objects = map[string]map[string]any{svmName: old}
	a.migrations.migrate = func(a *apiserver, svm map[string]any) {
		if svm["spec"] != nil {
			migrator(a, svm)
		}
	}
	_, err := m.Migrate(t.Context(), "widgets.example.com")
	require.NoError(t, err)
	require.Equal(t, []string{svmName}, a.migrations.deleted)
	require.Equal(t, 1, a.migrations.created)
	require.Equal(t, []string{"v1"}, a.stored)
}

func TestDryRunNamesTheMigration(t *testing.T) {
	a, m, _ := newMigrationTest(t, "v1")
	m.DryRun = true
	res, err := m.Migrate(t.Context(), "widgets.example.com")
	require.NoError(t, err)
	require.Equal(t, Result{CRD: "widgets.example.com", Storage: "v1", Before: []string{"v1beta1", "v1"}, After: []string{"v1"}, Rewritten: 3,
		Migration: "storageversionmigrations.storagemigration.k8s.io/" + svmName}, res)
	require.Zero(t, a.migrations.created)
	require.Empty(t, a.updates)
}

func TestMigrationName(t *testing.T) {
	require.Equal(t, "sunset-widgets.example.com-v1", migrationName(crd{name: "widgets.example.com", storage: "v1"}))
	long := migrationName(crd{name: strings.Repeat("a", 250) + ".example.com", storage: "v1"})
	require.Len(t, long, 253)
	require.Equal(t, long, migrationName(crd{name: strings.Repeat("a", 250) + ".example.com", storage: "v1"}))
	require.NotEqual(t, long, migrationName(crd{name: strings.Repeat("a", 250) + ".example.com", storage: "v2"}))
}

func TestParseMethod(t *testing.T) {
	for _, s := range []string{"auto", "migration", "rewrite"} {
		m, err := ParseMethod(s)
		require.NoError(t, err)
		require.Equal(t, Method(s), m)
	}
	_, err := ParseMethod("")
	require.EqualError(t, err, `--method "" is none of auto, migration, rewrite`)
}
