// Package helmrelease moves the objects of a Helm release's stored
// revision off APIs that are removed, so that the next `helm upgrade` (or
// rollback, or uninstall) can read what is deployed.
//
// Helm upgrades by comparing the new chart's objects with the ones its
// deployed revision records; when that record holds an API the cluster no
// longer serves, every upgrade fails before it starts. The fix writes the
// record again the way `helm upgrade` would have: a new revision, holding
// the deployed one's chart, values and notes with each object of a removed
// API moved to its replacement (by package convert's table, which refuses
// wherever the move would change what the object means), marked deployed,
// and the old revision marked superseded. The new revision and the old
// one's status are written by Helm's own storage drivers (Secrets, or
// ConfigMaps as HELM_DRIVER=configmap chooses), so the records are Helm's
// format.
//
// Writes go in an order every step of which Helm reads correctly: first a
// copy of the deployed revision's record (the backup, which Helm does not
// read as a revision), then the new revision, deployed (Helm's storage takes
// the highest deployed revision when more than one is, so from here on Helm
// reads the fixed one), then the old revision superseded. A run stopped
// anywhere leaves the release as it was or fixed, and running again
// finishes: a fixed release is left alone, and an older revision still
// marked deployed whose backup Sunset wrote is marked superseded.
//
// The Helm SDK is package helmstore's, which reads and writes the
// records (Records): this package links none of it, so that the CLI does
// not either.
//
// It calls only core/v1 Secrets and ConfigMaps and the discovery
// endpoints, never a deprecated API, and changes only records: the
// cluster's objects are stored at their replacement already, and the next
// helm upgrade applies the chart to them.
package helmrelease

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/kube-sunset/sunset/catalog"
	"github.com/kube-sunset/sunset/convert"
)

// Description is the description of a revision the fix writes, as
// `helm history` shows it.
const Description = "APIs removed from Kubernetes moved to their replacements by sunset fix releases"

// Step names a write of the fix, in the order they happen.
type Step string

// The writes of one release.
const (
	StepBackup    Step = "backup"
	StepRevision  Step = "revision"
	StepSupersede Step = "supersede"
)

// Records decodes and writes release records in Helm's own format, with
// Helm's release type and storage drivers. Package helmstore's is the Helm
// SDK's; the command passes it in, as it passes the chart renderer, so
// that this package and the CLI do not link the SDK.
type Records interface {
	// Decode reads a release, as JSON.
	Decode(r io.Reader) (Revision, error)
	// Create writes rev as the new record key in the store of kind
	// (Secret or ConfigMap) in namespace, as Helm's storage does; it is
	// ErrExists when the record is there already.
	Create(kube kubernetes.Interface, kind, namespace, key string, rev Revision) error
	// Update replaces the record key with rev, as Helm's storage does,
	// provided the record is still at resourceVersion: it is ErrChanged
	// when it is not.
	Update(kube kubernetes.Interface, kind, namespace, key, resourceVersion string, rev Revision) error
}

// ErrExists is Records.Create's error for a record that exists.
var ErrExists = errors.New("the release record exists")

// ErrChanged is Records.Update's error for a record written since it was
// read.
var ErrChanged = errors.New("the release record was changed since it was read")

// Revision is a decoded release record: the fields the fix reads and
// changes, over the release Records decoded.
type Revision struct {
	Name    string
	Version int
	// Status is Helm's: deployed, superseded, failed, pending-upgrade...
	Status string
	// Description and LastDeployed, when set, replace the release's; a
	// LastDeployed makes a new revision, not a rollback.
	Description  string
	LastDeployed time.Time
	Manifest     string
	// Hooks are the release's hooks, in order.
	Hooks []Hook
	// Labels are the record's custom labels (not SystemLabels).
	Labels map[string]string
	// Release is Records' own value of the whole release, written back
	// with the fields above; nothing else of it changes.
	Release any
}

// Hook is one of a release's hooks.
type Hook struct {
	// Path is the hook's template.
	Path     string
	Manifest string
}

// Helm's statuses of a revision the fix writes.
const (
	StatusDeployed   = "deployed"
	StatusSuperseded = "superseded"
)

// SystemLabels are the labels Helm's storage sets on a record itself,
// which it does not carry from a revision to the next.
var SystemLabels = []string{"name", "owner", "status", "version", "createdAt", "modifiedAt"}

// Fixer moves Helm releases' deployed revisions off removed APIs.
type Fixer struct {
	Kube kubernetes.Interface
	// Records reads and writes records in Helm's format: package
	// helmstore's.
	Records Records
	Catalog *catalog.Catalog
	Table   *convert.Table
	// Target is the release being upgraded to: an API the catalog
	// removes in it, or before, moves. Zero: only APIs the cluster does
	// not serve move.
	Target catalog.Release
	// Driver is Helm's storage driver, as HELM_DRIVER names it: secret
	// (also "", Helm's default) or configmap.
	Driver string
	// DryRun reads and says what would change, and writes nothing.
	DryRun bool
	// Now is the new revision's deploy time; time.Now when nil.
	Now func() time.Time
	// BeforeWrite, if set, runs before each write; an error stops the fix
	// of that release there, as a failed write would. A test interrupts
	// the fix with it at each step.
	BeforeWrite func(ctx context.Context, r Release, step Step, object string) error

	served *served
}

// Release is one Helm release, as its records' labels describe it.
type Release struct {
	Namespace, Name string
	// Store is the kind of object its records are: Secret or ConfigMap.
	Store string
	store store
	// revisions are the statuses by revision number, every record's.
	revisions map[int]string
	// deployed are the names of the records labelled deployed, by
	// revision. Only names are kept from the listing, which holds every
	// record's data: Fix reads the records it needs again.
	deployed map[int]string
}

// String is "namespace/name", as Helm's commands name a release.
func (r Release) String() string { return r.Namespace + "/" + r.Name }

// Result is what fixing one release did, or in a dry run would do.
type Result struct {
	Release Release
	// Revision is the deployed revision read; NewRevision the one
	// written, zero when none is.
	Revision, NewRevision int
	Changes               []Change
	// Backup is the name of the backup of Revision's record.
	Backup string
	// Superseded are the revisions marked superseded, in order.
	Superseded []int
	// UpToDate is true when Revision moves nothing: no record is
	// written but, after an interrupted fix, older revisions' status.
	UpToDate bool
}

// RefusedError says why a release was left as it is: objects that have
// to move and cannot.
type RefusedError struct {
	Release  Release
	Revision int
	Objects  []Refusal
}

func (e *RefusedError) Error() string {
	return fmt.Sprintf("%s: revision %d not fixed, %d objects cannot move to a served API; the release is left as it is",
		e.Release, e.Revision, len(e.Objects))
}

// BackupName is the name of the backup of a release's revision.
func BackupName(release string, revision int) string {
	return fmt.Sprintf("sunset-backup.%s.v%d", release, revision)
}

// recordName is the key Helm's storage gives a revision's record.
func recordName(release string, revision int) string {
	return fmt.Sprintf("sh.helm.release.v1.%s.v%d", release, revision)
}

// Find lists the Helm releases in namespace ("" for every namespace), or
// the one named name there, in the store of Driver, ordered by namespace
// and name.
func (f *Fixer) Find(ctx context.Context, namespace, name string) ([]Release, error) {
	selector := "owner=helm"
	if name != "" {
		selector += ",name=" + name
	}
	s, err := f.store()
	if err != nil {
		return nil, err
	}
	byKey := map[string]*Release{}
	o := metav1.ListOptions{LabelSelector: selector, Limit: listPageSize}
	for {
		records, next, err := s.list(ctx, namespace, o)
		if err != nil {
			return nil, explain(err, "list", s.kind(), namespace, "listing the Helm release records ("+s.kind()+"s)")
		}
		for _, r := range records {
			revision, err := strconv.Atoi(r.labels["version"])
			if r.labels["name"] == "" || err != nil {
				continue
			}
			key := r.namespace + "/" + r.labels["name"]
			if byKey[key] == nil {
				byKey[key] = &Release{Namespace: r.namespace, Name: r.labels["name"], Store: s.kind(), store: s, revisions: map[int]string{}, deployed: map[int]string{}}
			}
			byKey[key].revisions[revision] = r.labels["status"]
			if r.labels["status"] == StatusDeployed {
				byKey[key].deployed[revision] = r.name
			}
		}
		if o.Continue = next; next == "" {
			break
		}
	}
	out := make([]Release, 0, len(byKey))
	for _, r := range byKey {
		out = append(out, *r)
	}
	slices.SortFunc(out, func(a, b Release) int {
		return cmp.Or(cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name))
	})
	return out, nil
}

// store is the store Driver names, as Helm reads HELM_DRIVER.
func (f *Fixer) store() (store, error) {
	switch f.Driver {
	case "", "secret", "secrets":
		return secrets{f.Kube}, nil
	case "configmap", "configmaps":
		return configMaps{f.Kube}, nil
	}
	return nil, fmt.Errorf("HELM_DRIVER=%s: Sunset fixes the records of Helm's secret and configmap drivers only", f.Driver)
}

// Fix moves release's latest deployed revision off removed APIs. A
// release it cannot fully fix is refused with a *RefusedError and nothing
// written; a failed write stops the release there, in a state Helm reads
// as it was or as fixed, which running again finishes.
func (f *Fixer) Fix(ctx context.Context, r Release) (Result, error) {
	res := Result{Release: r}
	if f.Records == nil {
		return res, errors.New("helmrelease: a Fixer needs Records to read and write Helm's records (package helmstore's)")
	}
	if len(r.deployed) == 0 {
		return res, fmt.Errorf("%s: no revision is deployed (%s); Helm upgrades from the last one, so there is nothing to fix", r, r.statuses())
	}
	revisions := slices.Sorted(maps.Keys(r.deployed))
	latest := revisions[len(revisions)-1]
	res.Revision = latest
	rec, err := f.read(ctx, r, latest)
	if err != nil {
		return res, err
	}
	rel, err := f.decode(r, rec, latest)
	if err != nil {
		return res, err
	}
	moveIf, err := f.mustMove(ctx)
	if err != nil {
		return res, err
	}
	w := &rewriter{table: f.Table, mustMove: moveIf, served: f.served.serves}
	fixed := rel
	fixed.Manifest = w.manifest(rel.Manifest)
	fixed.Hooks = make([]Hook, len(rel.Hooks))
	for i, h := range rel.Hooks {
		before := len(w.changes)
		fixed.Hooks[i] = Hook{Path: h.Path, Manifest: w.manifest(h.Manifest)}
		for j := before; j < len(w.changes); j++ {
			w.changes[j].Template = h.Path
		}
	}
	res.Changes = w.changes
	if len(w.refused) > 0 {
		return res, &RefusedError{Release: r, Revision: latest, Objects: w.refused}
	}
	stale, err := f.stale(ctx, r, revisions[:len(revisions)-1])
	if err != nil {
		return res, err
	}
	if len(w.changes) == 0 {
		res.UpToDate = true
		return res, f.supersede(ctx, r, nil, stale, &res)
	}
	last := slices.Max(slices.Collect(maps.Keys(r.revisions)))
	if status := r.revisions[last]; strings.HasPrefix(status, "pending-") {
		return res, fmt.Errorf("%s: revision %d is %s: a helm install, upgrade or rollback is in progress, or was stopped. Wait for it, or settle it with helm rollback, then run the fix again", r, last, status)
	}
	res.Backup, res.NewRevision = BackupName(r.Name, latest), last+1
	if f.DryRun {
		res.Superseded = append([]int{latest}, stale...)
		return res, nil
	}
	if err := f.backup(ctx, r, rec, latest); err != nil {
		return res, err
	}
	fixed.Version, fixed.Status, fixed.Description, fixed.LastDeployed = res.NewRevision, StatusDeployed, Description, f.now()
	fixed.Labels = customLabels(rec.labels)
	if err := f.before(ctx, r, StepRevision, recordName(r.Name, res.NewRevision)); err != nil {
		return res, err
	}
	if err := f.Records.Create(f.Kube, r.Store, r.Namespace, recordName(r.Name, res.NewRevision), fixed); err != nil {
		if errors.Is(err, ErrExists) {
			return res, fmt.Errorf("%s: revision %d was written meanwhile (a helm upgrade?); nothing of the release was changed but its backup %s. Run the fix again", r, res.NewRevision, res.Backup)
		}
		return res, explain(err, "create", r.Store, r.Namespace, fmt.Sprintf("%s: writing revision %d (nothing of the release was changed but its backup %s)", r, res.NewRevision, res.Backup))
	}
	return res, f.supersede(ctx, r, map[int]record{latest: rec}, append([]int{latest}, stale...), &res)
}

func (f *Fixer) now() time.Time {
	if f.Now != nil {
		return f.Now()
	}
	return time.Now()
}

func (f *Fixer) before(ctx context.Context, r Release, step Step, object string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if f.BeforeWrite == nil {
		return nil
	}
	return f.BeforeWrite(ctx, r, step, object)
}

func (r Release) statuses() string {
	var s []string
	for _, v := range slices.Sorted(maps.Keys(r.revisions)) {
		s = append(s, fmt.Sprintf("revision %d %s", v, r.revisions[v]))
	}
	return strings.Join(s, ", ")
}

// explain turns a refusal into what to grant: the verb and resource
// missing, and the Role rule that allows them.
func explain(err error, verb, kind, namespace, doing string) error {
	if !apierrors.IsForbidden(err) {
		return fmt.Errorf("%s: %w", doing, err)
	}
	resource := strings.ToLower(kind) + "s"
	where := "a ClusterRole rule"
	if namespace != "" {
		where = "a Role rule in namespace " + namespace
	}
	return fmt.Errorf("%s: %w. Grant %s on %s, e.g. %s {apiGroups: [\"\"], resources: [%q], verbs: [%q]}",
		doing, err, verb, resource, where, resource, verb)
}
