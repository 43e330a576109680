package e2e

import (
	"context"
	"testing"

	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// requireScanLeastPrivilege asks kube-apiserver itself, by
// SubjectAccessReview, what the applied manifests (the scan overlay and
// the chart's scan example among them) let each service account do: only
// the scanner may list Secrets, cluster-wide; Sunset's own account, whose
// pod takes the audit webhook, is refused list and get on Secrets, and
// only gets the ConfigMap the scanner publishes in.
func requireScanLeastPrivilege(ctx context.Context, t *testing.T, admin kubernetes.Interface) {
	t.Helper()
	sa := func(name string) string { return "system:serviceaccount:" + sunsetNamespace + ":" + name }
	for _, c := range []struct {
		user  string
		attrs authorizationv1.ResourceAttributes
		want  bool
	}{
		{sa("sunset-scanner"), authorizationv1.ResourceAttributes{Verb: "list", Version: "v1", Resource: "secrets"}, true},
		{sa("sunset-scanner"), authorizationv1.ResourceAttributes{Verb: "get", Version: "v1", Resource: "secrets", Namespace: "default", Name: "sh.helm.release.v1.app.v1"}, false},
		{sa("sunset-scanner"), authorizationv1.ResourceAttributes{Verb: "update", Version: "v1", Resource: "configmaps", Namespace: sunsetNamespace, Name: "sunset-cluster-scan"}, true},
		{sa("sunset-scanner"), authorizationv1.ResourceAttributes{Verb: "create", Version: "v1", Resource: "configmaps", Namespace: sunsetNamespace}, false},
		{sa(sunsetAccount), authorizationv1.ResourceAttributes{Verb: "list", Version: "v1", Resource: "secrets"}, false},
		{sa(sunsetAccount), authorizationv1.ResourceAttributes{Verb: "list", Version: "v1", Resource: "secrets", Namespace: "default"}, false},
		{sa(sunsetAccount), authorizationv1.ResourceAttributes{Verb: "list", Version: "v1", Resource: "secrets", Namespace: sunsetNamespace}, false},
		{sa(sunsetAccount), authorizationv1.ResourceAttributes{Verb: "get", Version: "v1", Resource: "secrets", Namespace: "default", Name: "sh.helm.release.v1.app.v1"}, false},
		{sa(sunsetAccount), authorizationv1.ResourceAttributes{Verb: "get", Version: "v1", Resource: "secrets", Namespace: sunsetNamespace, Name: "sunset-webhook-tokens"}, false},
		{sa(sunsetAccount), authorizationv1.ResourceAttributes{Verb: "get", Version: "v1", Resource: "configmaps", Namespace: sunsetNamespace, Name: "sunset-cluster-scan"}, true},
		{sa(sunsetAccount), authorizationv1.ResourceAttributes{Verb: "update", Version: "v1", Resource: "configmaps", Namespace: sunsetNamespace, Name: "sunset-cluster-scan"}, false},
	} {
		attrs := c.attrs
		sar, err := admin.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
			User: c.user, Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + sunsetNamespace, "system:authenticated"},
			ResourceAttributes: &attrs}}, metav1.CreateOptions{})
		must(t, "a SubjectAccessReview", err)
		if sar.Status.Allowed != c.want {
			t.Errorf("%s %s %s %s/%s: allowed=%v, want %v (%s)", c.user, attrs.Verb, attrs.Resource, attrs.Namespace, attrs.Name,
				sar.Status.Allowed, c.want, sar.Status.Reason)
		}
	}
}
