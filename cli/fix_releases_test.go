package cli

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	fakediscovery "k8s.io/client-go/discovery/fake"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	chart "helm.sh/helm/v4/pkg/chart/v2"
	rcommon "helm.sh/helm/v4/pkg/release/common"
	rspb "helm.sh/helm/v4/pkg/release/v1"
	"helm.sh/helm/v4/pkg/storage/driver"

	"github.com/kube-sunset/sunset/fix/helmrelease/helmstore"
)

func TestFixReleasesRequestValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		req  FixReleasesRequest
		want string
	}{
		{"namespace", FixReleasesRequest{Namespace: "shop"}, ""},
		{"all namespaces and a target", FixReleasesRequest{AllNamespaces: true, TargetVersion: "1.37"}, ""},
		{"both", FixReleasesRequest{AllNamespaces: true, Namespace: "shop"}, "give -n NAMESPACE or --all-namespaces, not both"},
		{"bad target", FixReleasesRequest{TargetVersion: "1.x"}, `--target-version: "1.x" is not a Kubernetes release such as 1.37`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.req.Validate()
			if tc.want == "" {
				require.NoError(t, err)
				return
			}
			require.EqualError(t, err, tc.want)
		})
	}
}

// storeRelease writes a deployed revision with Helm's Secrets driver.
func storeRelease(t *testing.T, kube *fake.Clientset, namespace, name string, version int, manifest string) {
	t.Helper()
	rel := &rspb.Release{Name: name, Namespace: namespace, Version: version, Manifest: manifest,
		Info:  &rspb.Info{Status: rcommon.StatusDeployed, Description: "Install complete"},
		Chart: &chart.Chart{Metadata: &chart.Metadata{APIVersion: "v2", Name: name, Version: "0.1.0"}}}
	require.NoError(t, driver.NewSecrets(kube.CoreV1().Secrets(namespace)).Create("sh.helm.release.v1."+name+".v"+string(rune('0'+version)), rel))
}

func TestFixReleasesPrintsEachRelease(t *testing.T) {
	kube := fake.NewClientset()
	kube.Discovery().(*fakediscovery.FakeDiscovery).Resources = []*metav1.APIResourceList{
		{GroupVersion: "v1", APIResources: []metav1.APIResource{{Name: "configmaps", Kind: "ConfigMap"}}},
		{GroupVersion: "policy/v1", APIResources: []metav1.APIResource{{Name: "poddisruptionbudgets", Kind: "PodDisruptionBudget"}}},
		{GroupVersion: "networking.k8s.io/v1", APIResources: []metav1.APIResource{{Name: "ingresses", Kind: "Ingress"}}},
	}
	// The apiserver gives every object a resourceVersion, at which the fix
	// updates a record; the fake clientset gives none.
	kube.PrependReactor("create", "secrets", func(action k8stesting.Action) (bool, runtime.Object, error) {
		action.(k8stesting.CreateAction).GetObject().(*corev1.Secret).ResourceVersion = "1"
		return false, nil, nil
	})
	storeRelease(t, kube, "shop", "web", 1, "---\n# Source: web/templates/pdb.yaml\napiVersion: policy/v1beta1\nkind: PodDisruptionBudget\nmetadata:\n  name: web\nspec:\n  maxUnavailable: 1\n  selector:\n    matchLabels:\n      app: web\n"+
		"---\n# Source: web/templates/ingress.yaml\napiVersion: networking.k8s.io/v1beta1\nkind: Ingress\nmetadata:\n  name: web\nspec:\n  backend:\n    serviceName: web\n    servicePort: http\n")
	storeRelease(t, kube, "shop", "db", 2, "---\n# Source: db/templates/config.yaml\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: db\n")
	storeRelease(t, kube, "shop", "guard", 1, "---\n# Source: guard/templates/psp.yaml\napiVersion: policy/v1beta1\nkind: PodSecurityPolicy\nmetadata:\n  name: guard\n")
	storeRelease(t, kube, "other", "web", 1, "---\n# Source: web/templates/config.yaml\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: web\n")

	run := func(req FixReleasesRequest, namespace string) (stdout, stderr string, err error) {
		var o, e bytes.Buffer
		req.Records = helmstore.Records{}
		require.NoError(t, req.Validate())
		err = req.run(t.Context(), Output{Out: &o, Err: &e}, kube, namespace)
		return o.String(), e.String(), err
	}
	wantRefusal := "Error: shop/guard: revision 1: guard/templates/psp.yaml: PodSecurityPolicy guard (policy/v1beta1, not served by the cluster): " +
		"convert: policy/v1beta1 PodSecurityPolicy not converted: PodSecurityPolicy has no replacement; move its rules to Pod Security Admission or a policy engine\n" +
		"Error: shop/guard: revision 1 not fixed, 1 objects cannot move to a served API; the release is left as it is\n" +
		"Error: 1 of 3 Helm releases were not fixed\n"
	changes := "shop/web: PodDisruptionBudget/web: policy/v1beta1 -> policy/v1\n" +
		"shop/web: Ingress/web: networking.k8s.io/v1beta1 -> networking.k8s.io/v1 (fields: spec.backend removed, spec.defaultBackend added)\n"

	stdout, stderr, err := run(FixReleasesRequest{DryRun: true}, "shop")
	require.EqualError(t, err, "1 of 3 Helm releases were not fixed")
	require.Equal(t, "shop/db: revision 2 uses no API the cluster does not serve, nothing to do\n"+changes+
		"shop/web: would back up revision 1 as Secret sunset-backup.web.v1, write revision 2 with the replacements and mark revision 1 superseded (dry run: nothing written)\n", stdout)
	require.Equal(t, wantRefusal, stderr)
	l, err := kube.CoreV1().Secrets("").List(t.Context(), metav1.ListOptions{})
	require.NoError(t, err)
	require.Len(t, l.Items, 4, "the dry run wrote nothing")

	stdout, stderr, err = run(FixReleasesRequest{}, "shop")
	require.EqualError(t, err, "1 of 3 Helm releases were not fixed")
	require.Equal(t, "shop/db: revision 2 uses no API the cluster does not serve, nothing to do\n"+changes+
		"shop/web: revision 1 backed up as Secret sunset-backup.web.v1; revision 2 deployed with the replacements; revision 1 superseded\n", stdout)
	require.Equal(t, wantRefusal, stderr)

	stdout, stderr, err = run(FixReleasesRequest{Release: "web", AllNamespaces: true, TargetVersion: "1.37"}, "")
	require.NoError(t, err)
	require.Equal(t, "other/web: revision 1 uses no API removed by 1.37 or not served by the cluster, nothing to do\n"+
		"shop/web: revision 2 uses no API removed by 1.37 or not served by the cluster, nothing to do\n", stdout)
	require.Empty(t, stderr)

	stdout, _, err = run(FixReleasesRequest{Release: "api"}, "shop")
	require.NoError(t, err)
	require.Equal(t, "no Helm release named api in namespace shop\n", stdout)
}

// HELM_NAMESPACE and HELM_KUBECONTEXT stand for -n and --context when
// those are not given, as for helm; the kubeconfig context's namespace
// comes last, and --all-namespaces takes none.
func TestFixReleasesHonoursHelmsEnvironment(t *testing.T) {
	kubeconfig := filepath.Join(t.TempDir(), "config")
	require.NoError(t, os.WriteFile(kubeconfig, []byte(`apiVersion: v1
kind: Config
clusters:
- name: dev
  cluster: {server: "https://dev.example.com"}
- name: prod
  cluster: {server: "https://prod.example.com"}
users:
- name: me
  user: {token: t}
contexts:
- name: dev
  context: {cluster: dev, user: me, namespace: dev-ns}
- name: prod
  context: {cluster: prod, user: me, namespace: prod-ns}
current-context: dev
`), 0o600))
	for _, tc := range []struct {
		name                string
		req                 FixReleasesRequest
		wantHost, wantSpace string
	}{
		{"kubeconfig", FixReleasesRequest{}, "https://dev.example.com", "dev-ns"},
		{"HELM_KUBECONTEXT", FixReleasesRequest{HelmKubeContext: "prod"}, "https://prod.example.com", "prod-ns"},
		{"--context wins", FixReleasesRequest{Context: "dev", HelmKubeContext: "prod"}, "https://dev.example.com", "dev-ns"},
		{"HELM_NAMESPACE", FixReleasesRequest{HelmNamespace: "shop"}, "https://dev.example.com", "shop"},
		{"-n wins", FixReleasesRequest{Namespace: "web", HelmNamespace: "shop"}, "https://dev.example.com", "web"},
		{"all namespaces", FixReleasesRequest{AllNamespaces: true, HelmNamespace: "shop"}, "https://dev.example.com", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req := tc.req
			req.Kubeconfig = kubeconfig
			require.NoError(t, req.Validate())
			cfg, namespace, err := req.clientConfig()
			require.NoError(t, err)
			require.Equal(t, tc.wantHost, cfg.Host)
			require.Equal(t, tc.wantSpace, namespace)
		})
	}
}
