package crdstorage

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Method says how a CRD's objects are rewritten at its storage version.
type Method string

// The methods. MethodAuto hands the CRD to a StorageVersionMigration when
// the cluster serves the API and a migrator takes it up within
// Migrator.StartTimeout, and rewrites each object itself otherwise.
const (
	MethodAuto      Method = "auto"
	MethodMigration Method = "migration"
	MethodRewrite   Method = "rewrite"
)

// ParseMethod reads --method.
func ParseMethod(s string) (Method, error) {
	switch m := Method(s); m {
	case MethodAuto, MethodMigration, MethodRewrite:
		return m, nil
	}
	return "", fmt.Errorf("--method %q is none of auto, migration, rewrite", s)
}

// Defaults of the migration's waits.
const (
	DefaultStartTimeout = 30 * time.Second
	DefaultPollInterval = time.Second
)

// migrationVersions are the versions of storagemigration.k8s.io a
// migration may be written at, best first. v1beta1 is deprecated from
// 1.37, where v1 is served, so it is used only where v1 is not: on a
// cluster where it is not deprecated.
var migrationVersions = []string{"v1", "v1beta1"}

const migrationGroup = "storagemigration.k8s.io"

// managedBy labels the StorageVersionMigrations a migration creates.
const managedBy = "sunset"

// ErrNoMigrator is returned, wrapped, when a StorageVersionMigration was
// asked for (MethodMigration) and none can do the work.
var ErrNoMigrator = errors.New("no storage version migrator")

// migrationAPI returns the StorageVersionMigration resource at the best
// version the cluster serves, or false when it serves none.
func (m *Migrator) migrationAPI() (schema.GroupVersionResource, bool, error) {
	if m.Discovery == nil {
		return schema.GroupVersionResource{}, false, nil
	}
	for _, v := range migrationVersions {
		l, err := m.Discovery.ServerResourcesForGroupVersion(migrationGroup + "/" + v)
		if apierrors.IsNotFound(err) {
			continue
		}
		if err != nil {
			return schema.GroupVersionResource{}, false, fmt.Errorf("discovering %s/%s: %w", migrationGroup, v, err)
		}
		for _, r := range l.APIResources {
			if r.Name == "storageversionmigrations" {
				return schema.GroupVersionResource{Group: migrationGroup, Version: v, Resource: r.Name}, true, nil
			}
		}
	}
	return schema.GroupVersionResource{}, false, nil
}

// migrationName names the StorageVersionMigration of one CRD at one
// storage version, so that a run again finds the one it started. A name
// over the object name limit is cut and told apart by a hash.
func migrationName(c crd) string {
	name := "sunset-" + c.name + "-" + c.storage
	if len(name) <= 253 {
		return name
	}
	sum := sha256.Sum256([]byte(name))
	return name[:253-17] + "-" + hex.EncodeToString(sum[:8])
}

// migrateThrough has a StorageVersionMigration rewrite the CRD's objects.
// It returns false, having deleted its migration, when no migrator took it
// up within StartTimeout and the method allows rewriting instead. A
// migration already running under the same name, left by an interrupted
// run, is waited for rather than started again; one that ended is
// replaced, since its end says nothing of objects written since.
func (m *Migrator) migrateThrough(ctx context.Context, api schema.GroupVersionResource, c crd, res *Result) (bool, error) {
	client := m.Dynamic.Resource(api)
	name := migrationName(c)
	res.Migration = api.Resource + "." + api.Group + "/" + name
	svm, err := client.Get(ctx, name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		svm = nil
	case err != nil:
		return false, m.refusedMigration(err, "get", api, res)
	}
	if svm != nil {
		if state, _ := migrationState(svm); state == "Succeeded" || state == "Failed" {
			if err := client.Delete(ctx, name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
				return false, m.refusedMigration(err, "delete", api, res)
			}
			svm = nil
		}
	}
	if svm == nil {
		svm = &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": api.GroupVersion().String(),
			"kind":       "StorageVersionMigration",
			"metadata": map[string]any{
				"name":   name,
				"labels": map[string]any{"app.kubernetes.io/managed-by": managedBy},
			},
			"spec": map[string]any{"resource": map[string]any{"group": c.group, "resource": c.plural}},
		}}
		if svm, err = client.Create(ctx, svm, metav1.CreateOptions{}); err != nil {
			if apierrors.IsAlreadyExists(err) {
				return false, fmt.Errorf("StorageVersionMigration %s was created meanwhile by another run: run the fix again", name)
			}
			return false, m.refusedMigration(err, "create", api, res)
		}
	}
	return m.await(ctx, api, name, svm, res)
}

// refusedMigration is a refusal to work with StorageVersionMigrations:
// with MethodAuto the objects are rewritten instead, so it is no error.
func (m *Migrator) refusedMigration(err error, verb string, api schema.GroupVersionResource, res *Result) error {
	if m.method() == MethodAuto && apierrors.IsForbidden(err) {
		res.Migration = ""
		return nil
	}
	return explain(err, verb, api, verb+" StorageVersionMigration")
}

// await polls the migration until it ends, telling Progress of each change
// of its state. Stopping the wait leaves the migration to its migrator; a
// run again waits for it.
func (m *Migrator) await(ctx context.Context, api schema.GroupVersionResource, name string, svm *unstructured.Unstructured, res *Result) (bool, error) {
	client := m.Dynamic.Resource(api)
	start := m.now()
	last := "unset"
	ticker := time.NewTicker(m.pollInterval())
	defer ticker.Stop()
	for {
		state, message := migrationState(svm)
		if state != last {
			last = state
			m.progress(Progress{CRD: res.CRD, Storage: res.Storage, Migration: res.Migration, State: state})
		}
		switch state {
		case "Succeeded":
			return true, nil
		case "Failed":
			return false, fmt.Errorf("StorageVersionMigration %s failed: %s; status.storedVersions is left as it was. Fix the cause, then run the fix again (or with --method rewrite to see each object that cannot be written)", name, message)
		case "":
			if waited := m.now().Sub(start); waited >= m.startTimeout() {
				if m.method() == MethodMigration {
					return false, fmt.Errorf("StorageVersionMigration %s: no migrator took it up in %s (%w): kube-controller-manager runs one only with the StorageVersionMigrator feature gate on; it is left in place, or use --method rewrite", name, waited, ErrNoMigrator)
				}
				if err := client.Delete(ctx, name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
					return false, explain(err, "delete", api, "deleting StorageVersionMigration "+name+" that no migrator took up")
				}
				res.Migration = ""
				return false, nil
			}
		}
		select {
		case <-ctx.Done():
			return false, ctx.Err()
		case <-ticker.C:
		}
		got, err := client.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, explain(err, "get", api, "reading StorageVersionMigration "+name)
		}
		svm = got
	}
}

// migrationState is the migration's last state, Running, Succeeded or
// Failed, as its conditions say ("" before a migrator took it up), and the
// message of a failure.
func migrationState(svm *unstructured.Unstructured) (string, string) {
	conds, _, _ := unstructured.NestedSlice(svm.Object, "status", "conditions")
	state, message := "", ""
	for _, want := range []string{"Running", "Succeeded", "Failed"} {
		for _, c := range conds {
			cm, ok := c.(map[string]any)
			if !ok || cm["type"] != want || cm["status"] != "True" {
				continue
			}
			state = want
			message, _ = cm["message"].(string)
		}
	}
	return state, message
}

func (m *Migrator) method() Method {
	if m.Method == "" {
		return MethodAuto
	}
	return m.Method
}

func (m *Migrator) startTimeout() time.Duration {
	if m.StartTimeout > 0 {
		return m.StartTimeout
	}
	return DefaultStartTimeout
}

func (m *Migrator) pollInterval() time.Duration {
	if m.PollInterval > 0 {
		return m.PollInterval
	}
	return DefaultPollInterval
}

func (m *Migrator) now() time.Time {
	if m.Now != nil {
		return m.Now()
	}
	return time.Now()
}
