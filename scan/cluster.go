package scan

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"

	"github.com/kube-sunset/sunset/catalog"
	"github.com/kube-sunset/sunset/scan/report"
)

// PageSize is how many objects one list request asks for, so that memory
// stays flat however big the cluster. Helm's release records are listed
// without their data (metadata only), so they page the same.
const PageSize = 500

// Cluster scans a live cluster: its Helm releases, CRDs and APIServices.
type Cluster struct {
	Judge   Judge
	Kube    kubernetes.Interface
	Dynamic dynamic.Interface
	// Metadata lists Helm's release records without their data: a record
	// is up to 1.5 MiB, and anyone who may create Secrets in a namespace
	// can label hundreds of them as deployed releases.
	Metadata metadata.Interface
	Progress func(what, path string)
}

// NewCluster connects to the cluster cfg reaches.
func NewCluster(cfg *rest.Config, j Judge) (*Cluster, error) {
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	meta, err := metadata.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	return &Cluster{Judge: j, Kube: kube, Dynamic: dyn, Metadata: meta}, nil
}

// Scan reads the cluster. What the credentials may not list is reported in
// NotScanned and the scan goes on; a cluster that cannot be reached at all
// is an error.
func (c *Cluster) Scan(ctx context.Context) (report.Result, error) {
	v, err := c.Kube.Discovery().ServerVersion()
	if err != nil {
		return report.Result{}, fmt.Errorf("reaching the cluster: %w", err)
	}
	var res report.Result
	if cur, err := catalog.ParseRelease(v.GitVersion); err == nil {
		c.Judge.Current = cur
		res.CurrentVersion = cur.String()
	}
	if c.Judge.CRDs == nil {
		// A Helm release's objects of third-party APIs are judged by
		// the cluster's CRDs; a cluster whose CRDs cannot be listed is
		// judged by the catalog alone, and crds reports the gap.
		if crds, err := ReadCRDVersions(ctx, c.Dynamic); err == nil {
			c.Judge.CRDs = crds
		}
	}
	res.Merge(c.helmReleases(ctx))
	res.Merge(c.crds(ctx))
	res.Merge(c.apiServices(ctx))
	return res, nil
}

func (c *Cluster) progress(what, path string) {
	if c.Progress != nil {
		c.Progress(what, path)
	}
}

// listPages lists every page of a list, giving each to page. A refusal
// is returned as is for the caller to report.
func listPages(ctx context.Context, limit int64, list func(context.Context, metav1.ListOptions) (string, error)) error {
	opts := metav1.ListOptions{Limit: limit}
	for {
		next, err := list(ctx, opts)
		if err != nil {
			return err
		}
		if next == "" {
			return nil
		}
		opts.Continue = next
	}
}

// notScanned is a gap in the scan. Any error is one, not only a refusal,
// since one resource must not stop the rest of the scan; a refusal's
// message names the user, verb and resource, which says what to grant.
func notScanned(resource, namespace string, err error) report.NotScanned {
	return report.NotScanned{Resource: resource, Namespace: namespace, Reason: err.Error()}
}

var (
	crdGVR        = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}
	apiServiceGVR = schema.GroupVersionResource{Group: "apiregistration.k8s.io", Version: "v1", Resource: "apiservices"}
	secretGVR     = schema.GroupVersionResource{Version: "v1", Resource: "secrets"}
	configMapGVR  = schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
	namespaceGVR  = schema.GroupVersionResource{Version: "v1", Resource: "namespaces"}
)

// ClusterReads are the resources a cluster scan lists, and nothing else it
// reads but the apiserver's version: what RBAC must allow (verb list) for
// a scan without gaps. The shipped manifests are checked against it.
var ClusterReads = []schema.GroupVersionResource{secretGVR, configMapGVR, namespaceGVR, crdGVR, apiServiceGVR}

// crds reports each CRD that still stores objects at a version that is
// deprecated, no longer served, or that the catalog removes: dropping that
// version needs a storage migration first.
func (c *Cluster) crds(ctx context.Context) report.Result {
	c.progress("customresourcedefinitions", "")
	var res report.Result
	err := listPages(ctx, PageSize, func(ctx context.Context, o metav1.ListOptions) (string, error) {
		l, err := c.Dynamic.Resource(crdGVR).List(ctx, o)
		if err != nil {
			return "", err
		}
		for _, crd := range l.Items {
			res.Scanned.CRDs++
			res.Findings = append(res.Findings, c.storedVersions(crd)...)
		}
		return l.GetContinue(), nil
	})
	if err != nil {
		res.NotScanned = append(res.NotScanned, notScanned(resourceName(crdGVR), "", err))
	}
	return res
}

func (c *Cluster) storedVersions(crd unstructured.Unstructured) []report.Finding {
	group, _, _ := unstructured.NestedString(crd.Object, "spec", "group")
	kind, _, _ := unstructured.NestedString(crd.Object, "spec", "names", "kind")
	plural, _, _ := unstructured.NestedString(crd.Object, "spec", "names", "plural")
	stored, _, _ := unstructured.NestedStringSlice(crd.Object, "status", "storedVersions")
	versions, _, _ := unstructured.NestedSlice(crd.Object, "spec", "versions")
	type version struct{ served, deprecated bool }
	byName := map[string]version{}
	storage := ""
	for _, v := range versions {
		m, ok := v.(map[string]any)
		if !ok {
			continue
		}
		name, _ := m["name"].(string)
		served, _ := m["served"].(bool)
		deprecated, _ := m["deprecated"].(bool)
		byName[name] = version{served, deprecated}
		if s, _ := m["storage"].(bool); s {
			storage = name
		}
	}
	var out []report.Finding
	for _, sv := range stored {
		if sv == storage {
			continue
		}
		v, known := byName[sv]
		f := report.Finding{APIVersion: group + "/" + sv, Kind: kind, Name: crd.GetName(), Rule: report.RuleCRDStoredVersion,
			Origin: report.Origin{Object: "customresourcedefinitions/" + crd.GetName()}}
		why := ""
		switch e, inCatalog := c.Judge.Catalog.Lookup(group, sv, plural); {
		case !known || !v.served:
			f.Severity, f.Source, why = catalog.StateRemoved, report.SourceCRD, "no longer served"
		case inCatalog && c.Judge.severity(e.DeprecatedIn, e.RemovedIn) != "":
			f.Severity, f.DeprecatedIn, f.RemovedIn = c.Judge.severity(e.DeprecatedIn, e.RemovedIn), e.DeprecatedIn, e.RemovedIn
			f.Source = entrySource(e)
			why = "deprecated"
			if e.RemovedIn != "" {
				why += ", removed in v" + e.RemovedIn
			}
		case v.deprecated:
			f.Severity, f.Source, why = catalog.StateDeprecated, report.SourceCRD, "marked deprecated"
		default:
			continue
		}
		f.Replacement = group + "/" + storage + " " + kind
		f.Message = fmt.Sprintf("%s still lists %s in status.storedVersions (%s): objects may still be stored at it. "+
			"Rewrite every %s at the storage version %s (a StorageVersionMigration, or `kubectl get %s.%s -A -o json | kubectl replace -f -`), "+
			"then `kubectl patch crd %s --subresource=status --type=merge -p '{\"status\":{\"storedVersions\":[\"%s\"]}}'`, before removing %s from the CRD",
			crd.GetName(), sv, why, kind, storage, plural, group, crd.GetName(), storage, sv)
		out = append(out, f)
	}
	return out
}

// automanagedLabel marks the APIServices kube-apiserver keeps for its own
// group versions.
const automanagedLabel = "kube-aggregator.kubernetes.io/automanaged"

// apiServices reports APIService objects, other than kube-apiserver's own,
// for group versions the catalog removes: an extension server or a
// leftover registration that claims a version Kubernetes drops.
func (c *Cluster) apiServices(ctx context.Context) report.Result {
	c.progress("apiservices", "")
	removal := c.groupVersionRemovals()
	var res report.Result
	err := listPages(ctx, PageSize, func(ctx context.Context, o metav1.ListOptions) (string, error) {
		l, err := c.Dynamic.Resource(apiServiceGVR).List(ctx, o)
		if err != nil {
			return "", err
		}
		for _, s := range l.Items {
			res.Scanned.APIServices++
			if _, ok := s.GetLabels()[automanagedLabel]; ok {
				// kube-apiserver registers these for the versions it serves
				// and drops them itself on upgrade; whether clients still
				// call those versions is the traffic's question.
				continue
			}
			group, _, _ := unstructured.NestedString(s.Object, "spec", "group")
			version, _, _ := unstructured.NestedString(s.Object, "spec", "version")
			gv := catalog.GroupVersion(group, version)
			e, ok := removal[gv]
			if !ok {
				continue
			}
			severity := c.Judge.severity(e.DeprecatedIn, e.RemovedIn)
			if severity == "" {
				continue
			}
			f := report.Finding{Severity: severity, Rule: report.RuleAPIService, APIVersion: "apiregistration.k8s.io/v1", Kind: "APIService",
				Name: s.GetName(), DeprecatedIn: e.DeprecatedIn, RemovedIn: e.RemovedIn, Source: entrySource(e),
				Origin: report.Origin{Object: "apiservices/" + s.GetName()}}
			f.Message = fmt.Sprintf("APIService %s registers %s, which Kubernetes removes in v%s: delete it, and move its clients to the replacement versions", s.GetName(), gv, e.RemovedIn)
			removed, _ := catalog.ParseRelease(e.RemovedIn)
			f.AlreadyRemoved = !c.Judge.Current.IsZero() && !c.Judge.Current.Less(removed)
			res.Findings = append(res.Findings, f)
		}
		return l.GetContinue(), nil
	})
	if err != nil {
		res.NotScanned = append(res.NotScanned, notScanned(resourceName(apiServiceGVR), "", err))
	}
	return res
}

// groupVersionRemovals is, for each group version every one of whose
// catalog entries is removed, the entry removed last: the group version is
// gone from that release on.
func (c *Cluster) groupVersionRemovals() map[string]catalog.Entry {
	out := map[string]catalog.Entry{}
	kept := map[string]bool{}
	for _, e := range c.Judge.Catalog.Entries() {
		gv := catalog.GroupVersion(e.Group, e.Version)
		if e.Removed().IsZero() {
			kept[gv] = true
			continue
		}
		if old, ok := out[gv]; !ok || old.Removed().Less(e.Removed()) {
			out[gv] = e
		}
	}
	for gv := range kept {
		delete(out, gv)
	}
	return out
}

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

// tooLarge reports whether err is one of the scan's size bounds.
func tooLarge(err error) bool {
	var t *TooLargeError
	return errors.As(err, &t) || errors.Is(err, errTooManyObjects)
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

func (s secretStore) resource() string                 { return resourceName(secretGVR) }
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

func (s configMapStore) resource() string                 { return resourceName(configMapGVR) }
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

// resourceName is a resource as kubectl names it: "secrets",
// "apiservices.apiregistration.k8s.io".
func resourceName(r schema.GroupVersionResource) string {
	return r.GroupResource().String()
}
