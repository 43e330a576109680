package scan

import (
	"context"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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

// resourceName is a resource as kubectl names it: "secrets",
// "apiservices.apiregistration.k8s.io".
func resourceName(r schema.GroupVersionResource) string {
	return r.GroupResource().String()
}
