// Package crdstorage migrates a CustomResourceDefinition's stored
// versions: it rewrites every object of the CRD at its storage version,
// then trims status.storedVersions to that version alone, after which the
// apiserver accepts removing the old versions from the CRD.
//
// It rewrites each object with an update of the object as read, the way
// kube-storage-version-migrator does: kube-apiserver re-encodes the object
// at the storage version, and writes it to etcd whenever the bytes differ
// (an object stored at an older version always differs; one already at the
// storage version is left as is, which is what is wanted). The
// resourceVersion read makes a concurrent change conflict, and a conflict
// is retried with a fresh read.
//
// Where the cluster serves storagemigration.k8s.io, it hands the rewrite
// to a StorageVersionMigration instead, which kube-controller-manager's
// migrator carries out (with its StorageVersionMigrator feature gate on),
// and waits for it; when no migrator takes the migration up in time, it
// deletes it and rewrites the objects itself (Method says which).
//
// It talks only to apiextensions.k8s.io/v1, to each CRD's storage version
// and to the newest storagemigration.k8s.io version served, and refuses a
// CRD whose storage version is itself deprecated, so it never calls a
// deprecated API. Deciding which CRDs need a migration beyond their
// storedVersions is package scan's.
package crdstorage

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
)

// DefaultPageSize is how many objects one list request asks for when
// Migrator.PageSize is zero, as kubectl's --chunk-size.
const DefaultPageSize = 500

// maxConflicts bounds the re-reads of one object that keeps changing
// under the migration; past it the object is reported as not rewritten.
const maxConflicts = 5

// maxRelists bounds how often an expired list is started again.
const maxRelists = 3

// CRDs is the resource of CustomResourceDefinitions, at the only version
// this package reads them.
var CRDs = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

// ErrIncomplete is returned, wrapped, when some objects were not
// rewritten: status.storedVersions was left as it was.
var ErrIncomplete = errors.New("not every object was rewritten")

// Migrator rewrites CRDs' objects at their storage version. Its zero value,
// with Dynamic set, migrates with pages of DefaultPageSize.
type Migrator struct {
	Dynamic dynamic.Interface
	// Discovery finds whether the cluster serves StorageVersionMigrations;
	// nil rewrites every object here, as MethodRewrite does.
	Discovery discovery.DiscoveryInterface
	// Method chooses between a StorageVersionMigration and rewriting each
	// object; "" is MethodAuto.
	Method Method
	// StartTimeout is how long a StorageVersionMigration may wait for a
	// migrator to take it up; 0 means DefaultStartTimeout.
	StartTimeout time.Duration
	// PollInterval is how often a StorageVersionMigration is read while
	// waiting for it; 0 means DefaultPollInterval.
	PollInterval time.Duration
	// Now is the clock of StartTimeout; nil is time.Now.
	Now func() time.Time
	// DryRun lists and counts, and writes nothing.
	DryRun bool
	// PageSize is the list limit; 0 means DefaultPageSize.
	PageSize int64
	// Progress, if set, is told after each page how far a CRD is.
	Progress func(Progress)
}

// Progress is how far the migration of one CRD is.
type Progress struct {
	CRD     string
	Storage string
	// Rewritten is how many objects were rewritten so far (in a dry run,
	// how many would be).
	Rewritten int
	// Failed is how many objects could not be rewritten so far.
	Failed int
	// Migration names the StorageVersionMigration doing the rewrite
	// (resource.group/name), and State is its state as it changes:
	// "" until a migrator takes it up, then Running, Succeeded or Failed.
	Migration, State string
}

// Result is what migrating one CRD did.
type Result struct {
	CRD     string
	Storage string
	// Before is status.storedVersions as read at the start; After is what
	// it is (or, in a dry run, would be) at the end.
	Before, After []string
	// Rewritten is how many objects were rewritten at Storage (in a dry
	// run, how many would be).
	Rewritten int
	// Failed are the objects not rewritten, each with why.
	Failed []ObjectError
	// UpToDate is true when storedVersions already listed only Storage:
	// nothing was rewritten.
	UpToDate bool
	// Migration names the StorageVersionMigration that rewrote the
	// objects (resource.group/name); "" when they were rewritten one by
	// one, and Rewritten is then their count.
	Migration string
}

// ObjectError is one object that could not be rewritten.
type ObjectError struct {
	Namespace, Name string
	Err             error
}

func (e ObjectError) String() string {
	if e.Namespace == "" {
		return e.Name + ": " + e.Err.Error()
	}
	return e.Namespace + "/" + e.Name + ": " + e.Err.Error()
}

// crd is the part of a CustomResourceDefinition a migration reads.
type crd struct {
	name, group, plural string
	storage             string
	storageDeprecated   bool
	stored              []string
	resourceVersion     string
	obj                 *unstructured.Unstructured
}

func readCRD(u *unstructured.Unstructured) (crd, error) {
	c := crd{name: u.GetName(), resourceVersion: u.GetResourceVersion(), obj: u}
	c.group, _, _ = unstructured.NestedString(u.Object, "spec", "group")
	c.plural, _, _ = unstructured.NestedString(u.Object, "spec", "names", "plural")
	c.stored, _, _ = unstructured.NestedStringSlice(u.Object, "status", "storedVersions")
	versions, _, _ := unstructured.NestedSlice(u.Object, "spec", "versions")
	for _, v := range versions {
		m, ok := v.(map[string]any)
		if !ok {
			continue
		}
		if storage, _ := m["storage"].(bool); storage {
			c.storage, _ = m["name"].(string)
			c.storageDeprecated, _ = m["deprecated"].(bool)
		}
	}
	if c.storage == "" || c.plural == "" {
		return c, fmt.Errorf("CustomResourceDefinition %s names no storage version or plural", c.name)
	}
	return c, nil
}

// needsMigration reports whether storedVersions lists a version other than
// the storage version.
func (c crd) needsMigration() bool {
	return slices.ContainsFunc(c.stored, func(v string) bool { return v != c.storage })
}

// Pending lists the CRDs whose status.storedVersions lists a version other
// than their storage version, by name: every CRD `sunset scan` reports as
// still storing objects at an old version, and those whose old version is
// still served and not deprecated.
func (m *Migrator) Pending(ctx context.Context) ([]string, error) {
	var names []string
	opts := metav1.ListOptions{Limit: m.pageSize()}
	for {
		l, err := m.Dynamic.Resource(CRDs).List(ctx, opts)
		if err != nil {
			return nil, explain(err, "list", CRDs, "listing CustomResourceDefinitions")
		}
		for i := range l.Items {
			c, err := readCRD(&l.Items[i])
			if err == nil && c.needsMigration() {
				names = append(names, c.name)
			}
		}
		if opts.Continue = l.GetContinue(); opts.Continue == "" {
			return names, nil
		}
	}
}

func (m *Migrator) pageSize() int64 {
	if m.PageSize > 0 {
		return m.PageSize
	}
	return DefaultPageSize
}

func (m *Migrator) progress(p Progress) {
	if m.Progress != nil {
		m.Progress(p)
	}
}

// Migrate rewrites every object of the CRD name at its storage version,
// then sets its status.storedVersions to that version alone. Objects that
// could not be rewritten are in the Result and the error wraps
// ErrIncomplete; storedVersions is then left alone. Running it again
// after an interruption redoes what is needed: an object already at the
// storage version is not written again by the apiserver.
func (m *Migrator) Migrate(ctx context.Context, name string) (Result, error) {
	u, err := m.Dynamic.Resource(CRDs).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return Result{CRD: name}, explain(err, "get", CRDs, "reading CustomResourceDefinition "+name)
	}
	c, err := readCRD(u)
	if err != nil {
		return Result{CRD: name}, err
	}
	res := Result{CRD: name, Storage: c.storage, Before: c.stored, After: c.stored}
	if !c.needsMigration() {
		res.UpToDate = true
		return res, nil
	}
	if c.storageDeprecated {
		return res, fmt.Errorf("CustomResourceDefinition %s stores at %s, which it marks deprecated: migrating to it would call a deprecated API. Make a served version that is not deprecated the storage version first", name, c.storage)
	}
	migrated, err := m.tryMigration(ctx, c, &res)
	if err != nil {
		return res, err
	}
	if !migrated {
		objects := schema.GroupVersionResource{Group: c.group, Version: c.storage, Resource: c.plural}
		if err := m.rewriteAll(ctx, objects, &res); err != nil {
			return res, err
		}
	}
	if len(res.Failed) > 0 {
		return res, fmt.Errorf("CustomResourceDefinition %s: %d of %d objects were not rewritten at %s, so status.storedVersions stays %v: %w",
			name, len(res.Failed), res.Rewritten+len(res.Failed), c.storage, c.stored, ErrIncomplete)
	}
	res.After = []string{c.storage}
	if m.DryRun {
		return res, nil
	}
	return res, m.trim(ctx, c, &res)
}

// tryMigration has a StorageVersionMigration rewrite the objects when the
// method and the cluster allow it, and reports whether one did. A dry run
// only names the migration it would create, and counts the objects.
func (m *Migrator) tryMigration(ctx context.Context, c crd, res *Result) (bool, error) {
	if m.method() == MethodRewrite {
		return false, nil
	}
	api, ok, err := m.migrationAPI()
	if err != nil {
		return false, err
	}
	if !ok {
		if m.method() == MethodMigration {
			return false, fmt.Errorf("the cluster serves no %s StorageVersionMigration (%w): use --method rewrite or auto", migrationGroup, ErrNoMigrator)
		}
		return false, nil
	}
	if m.DryRun {
		res.Migration = api.Resource + "." + api.Group + "/" + migrationName(c)
		return false, nil
	}
	return m.migrateThrough(ctx, api, c, res)
}

// rewriteAll rewrites every object of resource, page by page, reporting
// progress after each page.
func (m *Migrator) rewriteAll(ctx context.Context, resource schema.GroupVersionResource, res *Result) error {
	opts := metav1.ListOptions{Limit: m.pageSize()}
	relists := 0
	for {
		l, err := m.Dynamic.Resource(resource).List(ctx, opts)
		if apierrors.IsResourceExpired(err) && opts.Continue != "" && relists < maxRelists {
			// The continue token outlived etcd's compaction: list
			// again from the start. Objects already rewritten cost one
			// update each, which the apiserver does not write.
			relists++
			opts.Continue = ""
			res.Rewritten, res.Failed = 0, nil
			continue
		}
		if err != nil {
			return explain(err, "list", resource, "listing "+resource.Resource+"."+resource.Group)
		}
		for i := range l.Items {
			if err := ctx.Err(); err != nil {
				return err
			}
			if m.DryRun {
				res.Rewritten++
				continue
			}
			err := m.rewrite(ctx, resource, &l.Items[i])
			switch {
			case err == nil:
				res.Rewritten++
			case refusedByRBAC(err):
				return explain(err, "update", resource, "rewriting "+resource.Resource+"."+resource.Group)
			case ctx.Err() != nil:
				return ctx.Err()
			default:
				res.Failed = append(res.Failed, ObjectError{Namespace: l.Items[i].GetNamespace(), Name: l.Items[i].GetName(), Err: err})
			}
		}
		m.progress(Progress{CRD: res.CRD, Storage: res.Storage, Rewritten: res.Rewritten, Failed: len(res.Failed)})
		if opts.Continue = l.GetContinue(); opts.Continue == "" {
			return nil
		}
	}
}

// rewrite updates obj as read; on a conflict it reads it again and
// retries. An object deleted meanwhile needs no rewrite.
func (m *Migrator) rewrite(ctx context.Context, resource schema.GroupVersionResource, obj *unstructured.Unstructured) error {
	client := m.Dynamic.Resource(resource).Namespace(obj.GetNamespace())
	for attempt := 0; ; attempt++ {
		_, err := client.Update(ctx, obj, metav1.UpdateOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		if !apierrors.IsConflict(err) {
			return err
		}
		if attempt+1 == maxConflicts {
			return fmt.Errorf("changed under every one of %d rewrites: %w", maxConflicts, err)
		}
		if obj, err = client.Get(ctx, obj.GetName(), metav1.GetOptions{}); err != nil {
			if apierrors.IsNotFound(err) {
				return nil
			}
			return err
		}
	}
}

// trim sets status.storedVersions to the storage version, through the
// status subresource and with the resourceVersion of a fresh read. It
// refuses when the CRD changed in a way that may have stored objects at
// another version while the objects were being rewritten: its storage
// version changed, or storedVersions gained a version.
func (m *Migrator) trim(ctx context.Context, start crd, res *Result) error {
	for attempt := 0; ; attempt++ {
		u, err := m.Dynamic.Resource(CRDs).Get(ctx, start.name, metav1.GetOptions{})
		if err != nil {
			return explain(err, "get", CRDs, "reading CustomResourceDefinition "+start.name)
		}
		now, err := readCRD(u)
		if err != nil {
			return err
		}
		if now.storage != start.storage || slices.ContainsFunc(now.stored, func(v string) bool { return !slices.Contains(start.stored, v) }) {
			res.After = now.stored
			return fmt.Errorf("CustomResourceDefinition %s changed while its objects were rewritten (storage version %s, storedVersions %v; at the start %s, %v): run the fix again",
				start.name, now.storage, now.stored, start.storage, start.stored)
		}
		if err := unstructured.SetNestedStringSlice(u.Object, []string{start.storage}, "status", "storedVersions"); err != nil {
			return err
		}
		_, err = m.Dynamic.Resource(CRDs).UpdateStatus(ctx, u, metav1.UpdateOptions{})
		if err == nil {
			return nil
		}
		if !apierrors.IsConflict(err) || attempt+1 == maxConflicts {
			res.After = now.stored
			return explain(err, "update", schema.GroupVersionResource{Group: CRDs.Group, Version: CRDs.Version, Resource: CRDs.Resource + "/status"},
				"setting status.storedVersions of CustomResourceDefinition "+start.name)
		}
	}
}

// refusedByRBAC tells the authorizer's refusal, which every other object
// would get too, from an admission webhook's or policy's 403 about this
// one object.
func refusedByRBAC(err error) bool {
	// The authorizer's: `... is forbidden: User "bob" cannot update resource "widgets" ...`.
	msg := err.Error()
	return apierrors.IsForbidden(err) && strings.Contains(msg, `is forbidden: User "`) && strings.Contains(msg, `" cannot `)
}

// explain turns a refusal into what to grant: the verb and resource
// missing, and the ClusterRole rule that allows them.
func explain(err error, verb string, resource schema.GroupVersionResource, doing string) error {
	if !apierrors.IsForbidden(err) {
		return fmt.Errorf("%s: %w", doing, err)
	}
	return fmt.Errorf("%s: %w. Grant %s on %s, e.g. a ClusterRole rule {apiGroups: [%q], resources: [%q], verbs: [%q]}",
		doing, err, verb, resource.GroupResource(), resource.Group, resource.Resource, verb)
}
