package helmrelease

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// read gets a deployed revision's record again, as it is now, and checks
// it is still the deployed revision Find listed.
func (f *Fixer) read(ctx context.Context, r Release, revision int) (record, error) {
	name := r.deployed[revision]
	rec, err := r.store.get(ctx, r.Namespace, name)
	if err != nil {
		return rec, explain(err, "get", r.Store, r.Namespace, fmt.Sprintf("%s: reading revision %d's record %s", r, revision, name))
	}
	if l := rec.labels; l["owner"] != "helm" || l["name"] != r.Name || l["version"] != strconv.Itoa(revision) || l["status"] != StatusDeployed {
		return rec, fmt.Errorf("%s: %s %s is no longer revision %d deployed (labels %v): the release changed since it was listed (a helm operation?); run the fix again",
			r, r.Store, name, revision, l)
	}
	return rec, nil
}

// decode reads a deployed revision's record and checks it is the one its
// labels say.
func (f *Fixer) decode(r Release, rec record, revision int) (Revision, error) {
	rel, err := f.decodeRecord(rec.data)
	if err != nil {
		return rel, fmt.Errorf("%s: %s %s: %w", r, r.Store, rec.name, err)
	}
	if rel.Name != r.Name || rel.Version != revision {
		return rel, fmt.Errorf("%s: %s %s holds release %s revision %d, not what its labels say (%s revision %d); it was not written by Helm: leaving the release as it is",
			r, r.Store, rec.name, rel.Name, rel.Version, r.Name, revision)
	}
	rel.Labels = rec.labels
	return rel, nil
}

// customLabels are a record's labels but the ones Helm's storage sets
// itself, as Helm carries them from one revision to the next.
func customLabels(labels map[string]string) map[string]string {
	out := map[string]string{}
	for k, v := range labels {
		if !slices.Contains(SystemLabels, k) {
			out[k] = v
		}
	}
	return out
}

// backup copies the deployed revision's record, unless a copy of the same
// record is there from an interrupted run.
func (f *Fixer) backup(ctx context.Context, r Release, rec record, revision int) error {
	name := BackupName(r.Name, revision)
	existing, err := r.store.get(ctx, r.Namespace, name)
	switch {
	case err == nil && sameContent(existing, rec):
		return nil
	case err == nil:
		return fmt.Errorf("%s: %s %s exists and holds another record than %s; nothing was changed. If it is an old backup no longer needed, delete it, then run the fix again",
			r, r.Store, name, rec.name)
	case !apierrors.IsNotFound(err):
		return explain(err, "get", r.Store, r.Namespace, fmt.Sprintf("%s: reading %s %s (nothing was changed)", r, r.Store, name))
	}
	original, err := json.Marshal(rec.labels)
	if err != nil {
		return err
	}
	labels := map[string]string{LabelManagedBy: "sunset", LabelBackupRelease: r.Name, LabelBackupRevision: strconv.Itoa(revision)}
	annotations := map[string]string{AnnotationBackupOf: rec.name, AnnotationOriginalLabels: string(original)}
	if err := f.before(ctx, r, StepBackup, name); err != nil {
		return err
	}
	if err := r.store.createBackup(ctx, r.Namespace, rec, name, labels, annotations); err != nil {
		return explain(err, "create", r.Store, r.Namespace, fmt.Sprintf("%s: backing up %s as %s (nothing was changed)", r, rec.name, name))
	}
	return nil
}

// stale are the deployed revisions, older than the latest, that a fix
// stopped before marking superseded: those whose backup Sunset wrote.
func (f *Fixer) stale(ctx context.Context, r Release, older []int) ([]int, error) {
	var out []int
	for _, v := range older {
		b, err := r.store.get(ctx, r.Namespace, BackupName(r.Name, v))
		if apierrors.IsNotFound(err) {
			continue
		}
		if err != nil {
			return nil, explain(err, "get", r.Store, r.Namespace, fmt.Sprintf("%s: reading the backup of revision %d", r, v))
		}
		if b.labels[LabelBackupRelease] == r.Name && b.labels[LabelBackupRevision] == strconv.Itoa(v) {
			out = append(out, v)
		}
	}
	return out, nil
}

// supersede marks revisions superseded, as `helm upgrade` marks the
// revision it replaced: only the status changes. read are records read
// already; the others are read now. Each is written only if it is still
// as read, so that a helm operation meanwhile is not overwritten.
func (f *Fixer) supersede(ctx context.Context, r Release, read map[int]record, revisions []int, res *Result) error {
	for _, v := range revisions {
		if f.DryRun {
			res.Superseded = append(res.Superseded, v)
			continue
		}
		rec, ok := read[v]
		if !ok {
			var err error
			if rec, err = f.read(ctx, r, v); err != nil {
				return err
			}
		}
		rel, err := f.decode(r, rec, v)
		if err != nil {
			return err
		}
		rel.Status = StatusSuperseded
		if err := f.before(ctx, r, StepSupersede, rec.name); err != nil {
			return err
		}
		if err := f.Records.Update(f.Kube, r.Store, r.Namespace, rec.name, rec.resourceVersion, rel); err != nil {
			if errors.Is(err, ErrChanged) {
				return fmt.Errorf("%s: %s %s changed since it was read (a helm operation?), so revision %d was not marked superseded; Helm reads the fixed revision already. Run the fix again to finish",
					r, r.Store, rec.name, v)
			}
			return explain(err, "update", r.Store, r.Namespace,
				fmt.Sprintf("%s: marking revision %d superseded (Helm reads the fixed revision already; run the fix again to finish)", r, v))
		}
		res.Superseded = append(res.Superseded, v)
	}
	return nil
}
