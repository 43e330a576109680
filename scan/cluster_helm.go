package scan

import (
	"context"
	"slices"
	"strconv"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"

	"github.com/kube-sunset/sunset/scan/report"
)

// helmReleases judges the latest deployed revision of every Helm release,
// whichever storage driver (Secrets, the default, or ConfigMaps) keeps it.
// Older revisions are history: the next upgrade starts from the deployed
// one, so findings in them would be false alarms.
//
// The records are listed without their data, which keeps a few hundred
// bytes per release however many there are and however large; then each
// release's latest deployed record is read and judged alone, so the scan
// holds one record (at most maxRecordSize, maxReleaseSize inflated) at a
// time.
func (c *Cluster) helmReleases(ctx context.Context) report.Result {
	var res report.Result
	for _, store := range []releaseStore{secretStore{c.Kube}, configMapStore{c.Kube}} {
		c.progress("helm releases in "+store.resource(), "")
		latest := map[string]storedRelease{}
		gaps := c.listReleases(ctx, store, latest)
		res.NotScanned = append(res.NotScanned, gaps...)
		keys := make([]string, 0, len(latest))
		for k := range latest {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			r := latest[k]
			data, found, err := store.read(ctx, r.namespace, r.object)
			switch {
			case err != nil:
				res.NotScanned = append(res.NotScanned, notScanned(store.resource(), r.namespace, err))
			case found:
				// Gone or superseded since it was listed: an upgrade
				// in between, whose record the next scan reads.
				res.Merge(c.judgeRelease(r, data))
			}
		}
	}
	return res
}

// listReleases lists the deployed release records of a store cluster-wide,
// or, when that is refused, namespace by namespace, so that one namespace
// the user may not read costs only that namespace.
func (c *Cluster) listReleases(ctx context.Context, store releaseStore, latest map[string]storedRelease) []report.NotScanned {
	err := c.listReleasesIn(ctx, store, metav1.NamespaceAll, latest)
	if err == nil {
		return nil
	}
	if !apierrors.IsForbidden(err) {
		return []report.NotScanned{notScanned(store.resource(), "", err)}
	}
	var gaps []report.NotScanned
	var namespaces []string
	nsErr := listPages(ctx, PageSize, func(ctx context.Context, o metav1.ListOptions) (string, error) {
		l, err := c.Kube.CoreV1().Namespaces().List(ctx, o)
		if err != nil {
			return "", err
		}
		for _, ns := range l.Items {
			namespaces = append(namespaces, ns.Name)
		}
		return l.Continue, nil
	})
	if nsErr != nil {
		return []report.NotScanned{notScanned(store.resource(), "", err), notScanned(resourceName(namespaceGVR), "", nsErr)}
	}
	for _, ns := range namespaces {
		if err := c.listReleasesIn(ctx, store, ns, latest); err != nil {
			gaps = append(gaps, notScanned(store.resource(), ns, err))
		}
	}
	return gaps
}

// releaseSelector picks Helm's records of the revision in force: Helm
// labels each record with its status, and "deployed" is on the one
// revision of a release in force, also after a failed upgrade.
const releaseSelector = "owner=helm,status=deployed"

func (c *Cluster) listReleasesIn(ctx context.Context, store releaseStore, namespace string, latest map[string]storedRelease) error {
	return listPages(ctx, PageSize, func(ctx context.Context, o metav1.ListOptions) (string, error) {
		o.LabelSelector = releaseSelector
		l, err := c.Metadata.Resource(store.gvr()).Namespace(namespace).List(ctx, o)
		if err != nil {
			return "", err
		}
		for _, item := range l.Items {
			r := recordOf(item.ObjectMeta)
			key := r.namespace + "/" + r.name
			if old, ok := latest[key]; !ok || old.revision < r.revision {
				latest[key] = r
			}
		}
		return l.Continue, nil
	})
}

func (c *Cluster) judgeRelease(r storedRelease, data string) report.Result {
	res := report.Result{Scanned: report.Scanned{HelmReleases: 1}}
	origin := report.Origin{Release: r.namespace + "/" + r.name, Revision: r.revision}
	where := "helm release " + origin.Release
	rel, err := decodeRelease(data)
	if err != nil {
		res.Errors = append(res.Errors, report.InputError{Path: where, Err: err.Error()})
		return res
	}
	for _, m := range rel.manifests() {
		objs, err := c.Judge.readObjects([]byte(m.Text))
		if tooLarge(err) {
			// Whatever was read of it is not the release: none of its
			// findings count, the release is reported unread.
			return report.Result{Scanned: report.Scanned{HelmReleases: 1},
				Errors: []report.InputError{{Path: where, Err: m.Template + ": " + err.Error()}}}
		}
		if err != nil {
			res.Errors = append(res.Errors, report.InputError{Path: where, Err: m.Template + ": " + err.Error()})
		}
		res.Scanned.Objects += len(objs)
		if res.Scanned.Objects > MaxObjects {
			return report.Result{Scanned: report.Scanned{HelmReleases: 1},
				Errors: []report.InputError{{Path: where, Err: errTooManyObjects.Error()}}}
		}
		for _, o := range objs {
			if o.Namespace == "" {
				o.Namespace = r.namespace
			}
			at := origin
			at.Template = m.Template
			res.Findings = append(res.Findings, c.Judge.Judge(o, at)...)
		}
	}
	return res
}

// storedRelease is one release record, as its labels describe it: what
// the scan keeps of each until it reads the record.
type storedRelease struct {
	namespace, name string
	revision        int
	// object is the Secret's or ConfigMap's name.
	object string
}

// releaseStore is one of Helm's storage drivers.
type releaseStore interface {
	resource() string
	gvr() schema.GroupVersionResource
	// read returns one record's data, if it is still a deployed release.
	read(ctx context.Context, namespace, object string) (string, bool, error)
}

// recordSelector lists one record by name, with what listing takes
// (verb list; a scan is granted no get), and only while it is deployed.
func recordSelector(object string) metav1.ListOptions {
	return metav1.ListOptions{LabelSelector: releaseSelector, FieldSelector: "metadata.name=" + object}
}

type secretStore struct{ kube kubernetes.Interface }

func (s secretStore) resource() string { return resourceName(secretGVR) }

func (s secretStore) gvr() schema.GroupVersionResource { return secretGVR }

func (s secretStore) read(ctx context.Context, namespace, object string) (string, bool, error) {
	l, err := s.kube.CoreV1().Secrets(namespace).List(ctx, recordSelector(object))
	if err != nil {
		return "", false, err
	}
	for _, item := range l.Items {
		if item.Name == object {
			return string(item.Data["release"]), true, nil
		}
	}
	return "", false, nil
}

type configMapStore struct{ kube kubernetes.Interface }

func (s configMapStore) resource() string { return resourceName(configMapGVR) }

func (s configMapStore) gvr() schema.GroupVersionResource { return configMapGVR }

func (s configMapStore) read(ctx context.Context, namespace, object string) (string, bool, error) {
	l, err := s.kube.CoreV1().ConfigMaps(namespace).List(ctx, recordSelector(object))
	if err != nil {
		return "", false, err
	}
	for _, item := range l.Items {
		if item.Name == object {
			return item.Data["release"], true, nil
		}
	}
	return "", false, nil
}

func recordOf(m metav1.ObjectMeta) storedRelease {
	rev, _ := strconv.Atoi(m.Labels["version"])
	name := m.Labels["name"]
	if name == "" {
		// sh.helm.release.v1.<name>.v<revision>
		name = strings.TrimPrefix(m.Name, "sh.helm.release.v1.")
		if i := strings.LastIndex(name, ".v"); i > 0 {
			name = name[:i]
		}
	}
	return storedRelease{namespace: m.Namespace, name: name, revision: rev, object: m.Name}
}
