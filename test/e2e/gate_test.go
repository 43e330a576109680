package e2e

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	storagev1beta1 "k8s.io/api/storage/v1beta1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/restmapper"
	"k8s.io/client-go/tools/clientcmd"
)

// The upgrade gate's shipped objects and the CRDs of the kinds it judges
// (testdata/cluster-api/README.md, testdata/ack-eks-controller/README.md).
const (
	shippedGateOverlay = "../../deploy/kubernetes/overlays/gate"
	shippedArgoPreSync = "../../deploy/pipeline/argocd-presync.yaml"
	clusterAPICRDs     = "testdata/cluster-api"
	ackEKSCRDs         = "testdata/ack-eks-controller"
	// fleetNS holds the cluster objects, as a GitOps repository's
	// application would.
	fleetNS = "fleet"
	// gateWebhook is the webhook's name in the overlay, as kube-apiserver
	// names it in a refusal.
	gateWebhook = "gate.sunset.dev"
	// vacAPI is removed in 1.37.
	vacAPI = "volumeattributesclasses.v1beta1.storage.k8s.io"
	// legacyCluster's only caller of vacAPI stopped 3h ago, longer than
	// the server's gate.cleanFor of 1h.
	legacyCluster = "legacy"
	// exemptionLife is how long after the start carol's exemption
	// expires: longer than the setup before its use takes.
	exemptionLife   = 45 * time.Second
	exemptionReason = "CHG-1300: carol-cli moves to storage.k8s.io/v1"
	// e2eVerdict and legacyVerdict are the verdicts' sentences at 1.37.
	e2eVerdict = "NOT SAFE to upgrade to 1.37: 1 API removed in or before 1.37 was requested in the last 24h, system users excluded. " +
		"Upgrading from 1.36, the first release that breaks is 1.37; breaking at each: 1.37 (volumeattributesclasses.v1beta1.storage.k8s.io)."
	legacyVerdict = "NOT SAFE to upgrade to 1.37: 1 API removed in or before 1.37 was requested in the last 24h, system users excluded."
)

var (
	capiClusters = schema.GroupVersionResource{Group: "cluster.x-k8s.io", Version: "v1beta2", Resource: "clusters"}
	kcps         = schema.GroupVersionResource{Group: "controlplane.cluster.x-k8s.io", Version: "v1beta2", Resource: "kubeadmcontrolplanes"}
	eksClusters  = schema.GroupVersionResource{Group: "eks.services.k8s.aws", Version: "v1alpha1", Resource: "clusters"}
)

// A real kube-apiserver with the real CRDs of Cluster API's Cluster and
// KubeadmControlPlane and of ACK's EKS Cluster calls Sunset's gate through
// the ValidatingWebhookConfiguration the overlay ships. With carol calling
// storage.k8s.io/v1beta1 VolumeAttributesClass (removed in 1.37) in
// cluster e2e, a kubectl patch to v1.37.0 of any object standing for e2e
// is refused naming carol, her user agent, the hour she was last seen and
// the API; while the server's exemption of carol holds, the same bump is
// allowed, and once it has expired refused again. A patch release, a
// cluster with no removed-API callers, a deprecated-only finding and a
// cluster whose only removed-API caller has been silent longer than
// gate.cleanFor are allowed, the last three with kubectl warnings; the
// override annotation lets the bump through with a one-line warning, and
// is counted, and kept unless it was a dry run. The Argo CD
// PreSync Job's `sunset check`, run as its ServiceAccount with its RBAC,
// refuses the same bump.
func TestUpgradeGateThroughKubeAPIServer(t *testing.T) {
	sunsetBin, apiserverBin, etcdBin := peerBinaries(t)
	p := newPKI(t)
	token := randomToken(t)
	port := freePort(t)
	sunsetURL := fmt.Sprintf("https://127.0.0.1:%d", port)
	a := startAPIServer(t, apiserverBin, startEtcd(t, etcdBin, p), p,
		webhookKubeconfig(t, p, sunsetURL+"/audit/webhook/"+clusterName+"/"+nodeName, token), frontProxyFlags(t)...)
	ctx := ctxWithin(t, 8*time.Minute)
	admin := a.as(t, "admin", "e2e-setup/1.0")
	// The sunset binary reads the wall clock and has no hook to set it:
	// the exemption expires a real instant after the start, late enough
	// for the setup below to use it, and the test waits for the server
	// to report it expired.
	exemptUntil := time.Now().Add(exemptionLife).UTC().Truncate(time.Second)
	gateConfig := p.write(t, "sunset.yaml", []byte("gate:\n  enabled: true\n  cleanFor: 1h\n"+
		"exemptions:\n- api: "+vacAPI+"\n  user: carol\n  reason: "+strconv.Quote(exemptionReason)+"\n  expires: "+strconv.Quote(exemptUntil.Format(time.RFC3339))+"\n"))
	s := serveAggregated(ctx, t, a, admin, p, sunsetBin, token, port, "--config="+gateConfig)
	adminKubeconfig := userKubeconfig(t, a, "admin", a.tokens["admin"])

	cfg := a.config(a.tokens["admin"], "e2e-setup/1.0")
	dyn, err := dynamic.NewForConfig(cfg)
	must(t, "dynamic client", err)
	disco, err := discovery.NewDiscoveryClientForConfig(cfg)
	must(t, "discovery client", err)
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(disco))
	installCRDs(ctx, t, dyn, mapper, clusterAPICRDs, 3)
	installCRDs(ctx, t, dyn, mapper, ackEKSCRDs, 1)

	// The overlay's webhook and ExtensionConfig as it ships them, with the
	// CA the injectors would fill in and the port the ExternalName
	// Service (serveAggregated) reaches Sunset on.
	caPEM, err := os.ReadFile(p.CAFile)
	must(t, "reading the CA", err)
	gateObjects := 0
	for _, obj := range kustomizeBuild(t, shippedGateOverlay) {
		switch obj.GetKind() {
		case "ValidatingWebhookConfiguration":
			hooks, _, _ := unstructured.NestedSlice(obj.Object, "webhooks")
			if len(hooks) != 1 {
				t.Fatalf("the overlay's webhook configuration has %d webhooks, want 1", len(hooks))
			}
			hook := hooks[0].(map[string]any)
			if hook["name"] != gateWebhook {
				t.Fatalf("the overlay's webhook is %v, want %s", hook["name"], gateWebhook)
			}
			must(t, "caBundle", unstructured.SetNestedField(hook, base64.StdEncoding.EncodeToString(caPEM), "clientConfig", "caBundle"))
			must(t, "port", unstructured.SetNestedField(hook, int64(port), "clientConfig", "service", "port"))
			must(t, "webhooks", unstructured.SetNestedSlice(obj.Object, hooks, "webhooks"))
		case "ExtensionConfig":
			// Checked against Cluster API's own schema; no Cluster API
			// controller runs here to call it.
		default:
			continue
		}
		applyObject(ctx, t, dyn, mapper, obj, "e2e-gate")
		gateObjects++
	}
	if gateObjects != 2 {
		t.Fatalf("applied %d of the overlay's gate objects, want its webhook and ExtensionConfig", gateObjects)
	}

	// The cluster objects: each stands for a Sunset cluster by its name,
	// its sunset.dev/cluster label or annotation, or, a control plane, by
	// the label Cluster API gives it naming its Cluster.
	_, err = admin.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: fleetNS}}, metav1.CreateOptions{})
	must(t, "creating namespace "+fleetNS, err)
	create := func(gvr schema.GroupVersionResource, obj map[string]any) {
		t.Helper()
		_, err := dyn.Resource(gvr).Namespace(fleetNS).Create(ctx, &unstructured.Unstructured{Object: obj}, metav1.CreateOptions{})
		must(t, fmt.Sprintf("creating %s %v", gvr.Resource, obj["metadata"]), err)
	}
	capiCluster := func(name, version string, labels map[string]any) map[string]any {
		return map[string]any{"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Cluster",
			"metadata": map[string]any{"name": name, "labels": labels},
			"spec":     map[string]any{"topology": map[string]any{"classRef": map[string]any{"name": "quick-start"}, "version": version}}}
	}
	create(capiClusters, capiCluster(clusterName, "v1.36.3", nil))
	create(capiClusters, capiCluster("staging", "v1.36.3", nil))
	create(capiClusters, capiCluster(legacyCluster, "v1.36.3", nil))
	create(capiClusters, capiCluster("e2e-canary", "v1.35.2", map[string]any{"sunset.dev/cluster": clusterName}))
	create(kcps, map[string]any{"apiVersion": "controlplane.cluster.x-k8s.io/v1beta2", "kind": "KubeadmControlPlane",
		"metadata": map[string]any{"name": "e2e-control-plane", "labels": map[string]any{"cluster.x-k8s.io/cluster-name": clusterName}},
		"spec": map[string]any{"version": "v1.36.3", "machineTemplate": map[string]any{"spec": map[string]any{
			"infrastructureRef": map[string]any{"apiGroup": "infrastructure.cluster.x-k8s.io", "kind": "DockerMachineTemplate", "name": "e2e-control-plane"}}}}})
	create(eksClusters, map[string]any{"apiVersion": "eks.services.k8s.aws/v1alpha1", "kind": "Cluster",
		"metadata": map[string]any{"name": "e2e-eks", "annotations": map[string]any{"sunset.dev/cluster": clusterName}},
		"spec": map[string]any{"name": "e2e-eks", "version": "1.36", "roleARN": "arn:aws:iam::111122223333:role/eks",
			"resourcesVPCConfig": map[string]any{"subnetIDs": []any{"subnet-0a", "subnet-0b"}}}})

	// carol calls an API removed in 1.37 and one deprecated for good, in
	// cluster e2e; dave, in cluster staging, only the deprecated one; erin,
	// in cluster legacy, called the removed one 3h ago and not since.
	carol := a.as(t, "carol", carolAgent)
	bindClusterAdmin(ctx, t, admin, "carol")
	_, err = carol.CoreV1().ComponentStatuses().List(ctx, metav1.ListOptions{})
	must(t, "list componentstatuses", err)
	vacs := carol.StorageV1beta1().VolumeAttributesClasses()
	_, err = vacs.Create(ctx, &storagev1beta1.VolumeAttributesClass{ObjectMeta: metav1.ObjectMeta{Name: "gold"}, DriverName: "csi.example.com",
		Parameters: map[string]string{"iops": "3000"}}, metav1.CreateOptions{})
	must(t, "create volumeattributesclass", err)
	// The refusal names the hour carol was last seen: that of her last
	// call, read again should the clock pass an hour during it.
	var carolLastSeen time.Time
	for {
		sent := time.Now().UTC().Truncate(time.Hour)
		_, err = vacs.Get(ctx, "gold", metav1.GetOptions{})
		must(t, "get volumeattributesclass", err)
		if hour := time.Now().UTC().Truncate(time.Hour); hour.Equal(sent) {
			carolLastSeen = hour
			break
		}
	}
	postStagingTraffic(t, s, p, token)
	erinLastSeen := postLegacyTraffic(t, s, p, token)
	waitFor(t, "Sunset to count carol's, dave's and erin's requests", 2*time.Minute, func() error {
		for _, c := range []struct{ api, cluster string }{{vacAPI, clusterName}, {"componentstatuses.v1", "staging"}, {vacAPI, legacyCluster}} {
			var rc struct {
				Status struct {
					RequestCount int64 `json:"requestCount"`
				} `json:"status"`
			}
			if err := getSunsetJSONErr(s, a.tokens["admin"], "/apis/sunset.dev/v1/apirequestcounts/"+c.api+"?cluster="+c.cluster, &rc); err != nil {
				return err
			}
			if rc.Status.RequestCount == 0 {
				return fmt.Errorf("%s in %s: no requests yet", c.api, c.cluster)
			}
		}
		return nil
	})

	// kube-apiserver picks the webhook up asynchronously: dry runs, which
	// a webhook with sideEffects: NoneOnDryRun sees, probe until staging's
	// bump draws the gate's warnings. (e2e's bump is exempted until
	// exemptUntil.)
	patchVersion := `{"spec":{"topology":{"version":"v1.37.0"}}}`
	waitFor(t, "kube-apiserver to call the gate", time.Minute, func() error {
		_, stderr, err := kubectlOut(t, adminKubeconfig, "-n", fleetNS, "patch", "clusters.cluster.x-k8s.io", "staging", "--type=merge", "-p", patchVersion, "--dry-run=server")
		if err != nil {
			return fmt.Errorf("%w: %s", err, stderr)
		}
		if len(kubectlWarnings(stderr)) == 0 {
			return errNotYet
		}
		return nil
	})

	// While carol's exemption holds, e2e's bump is allowed, her calls
	// marked as exempted; the step back down to 1.36 is no upgrade.
	const (
		vacWarning = "sunset: storage.k8s.io/v1beta1 VolumeAttributesClass is deprecated in v1.34+, unavailable in v1.37+; " +
			"use storage.k8s.io/v1 VolumeAttributesClass"
		csWarning = "sunset: v1 ComponentStatus is deprecated in v1.19+: 1 request in the last 24h by "
	)
	if left := time.Until(exemptUntil); left < 10*time.Second {
		t.Fatalf("the setup outlived carol's exemption (%s left of %s); raise exemptionLife", left, exemptionLife)
	} else {
		t.Logf("carol's exemption holds %s more", left.Truncate(time.Second))
	}
	_, stderr, err := kubectlOut(t, adminKubeconfig, "-n", fleetNS, "patch", "clusters.cluster.x-k8s.io", clusterName, "--type=merge", "-p", patchVersion)
	must(t, "kubectl patch of e2e while carol is exempted: "+stderr, err)
	requireVersion(ctx, t, dyn, capiClusters, clusterName, "v1.37.0", "spec", "topology", "version")
	wantExempted := []string{vacWarning + ": every caller has stopped or is exempted", csWarning + "carol", "sunset: allowed: nothing removed by 1.37 is still called"}
	if got := kubectlWarnings(stderr); !slices.Equal(got, wantExempted) {
		t.Errorf("kubectl patch of e2e while carol is exempted: warnings\n%q\nwant\n%q", got, wantExempted)
	}
	_, stderr, err = kubectlOut(t, adminKubeconfig, "-n", fleetNS, "patch", "clusters.cluster.x-k8s.io", clusterName, "--type=merge",
		"-p", `{"spec":{"topology":{"version":"v1.36.3"}}}`)
	must(t, "kubectl patch of e2e back to v1.36.3: "+stderr, err)
	requireVersion(ctx, t, dyn, capiClusters, clusterName, "v1.36.3", "spec", "topology", "version")
	if got := kubectlWarnings(stderr); got != nil {
		t.Errorf("kubectl patch of e2e back to v1.36.3: warnings %q, want none", got)
	}
	wantExpired := exemption{API: vacAPI, UserName: "carol", Reason: exemptionReason, Expires: exemptUntil}
	waitFor(t, "carol's exemption to expire", exemptionLife+time.Minute, func() error {
		var check gateUpgradeCheck
		if err := getSunsetJSONErr(s, a.tokens["admin"], "/apis/sunset.dev/v1/upgradechecks/1.37?cluster="+clusterName, &check); err != nil {
			return err
		}
		switch exp := check.Status.ExpiredExemptions; {
		case len(exp) == 0:
			return errNotYet
		case len(exp) != 1 || !exp[0].Expires.Equal(wantExpired.Expires) || exp[0].API != wantExpired.API ||
			exp[0].UserName != wantExpired.UserName || exp[0].UserAgent != "" || exp[0].Reason != wantExpired.Reason:
			t.Fatalf("upgradechecks/1.37: expiredExemptions %+v, want only %+v", exp, wantExpired)
		}
		if len(check.Status.Exemptions) != 0 {
			t.Fatalf("upgradechecks/1.37: exemptions in force %+v after the expiry", check.Status.Exemptions)
		}
		return nil
	})
	before := gateReviews(t, s, a.tokens["admin"])

	// Refused, now that the exemption has expired: each object that
	// stands for e2e, in its own spelling, with the verdict's sentence,
	// carol's two requests to the removed API with her user agent and the
	// hour she was last seen, and the override that names the object.
	// carol is active, so gate.cleanFor does not count her as fixed. An
	// update that also points the object at a cluster Sunset never heard
	// is judged as the cluster the object stood for.
	for _, tc := range []struct{ resource, kind, name, patch string }{
		{"clusters.cluster.x-k8s.io", "Cluster", clusterName, patchVersion},
		{"kubeadmcontrolplanes.controlplane.cluster.x-k8s.io", "KubeadmControlPlane", "e2e-control-plane", `{"spec":{"version":"v1.37.0"}}`},
		{"clusters.eks.services.k8s.aws", "Cluster", "e2e-eks", `{"spec":{"version":"1.37"}}`},
		{"clusters.eks.services.k8s.aws", "Cluster", "e2e-eks", `{"metadata":{"annotations":{"sunset.dev/cluster":"nowhere"}},"spec":{"version":"1.37"}}`},
	} {
		_, stderr, err := kubectlOut(t, adminKubeconfig, "-n", fleetNS, "patch", tc.resource, tc.name, "--type=merge", "-p", tc.patch)
		if err == nil {
			t.Errorf("kubectl patch %s %s to 1.37 was allowed; want it refused", tc.resource, tc.name)
			continue
		}
		want := `Error from server (Forbidden): admission webhook "` + gateWebhook + `" denied the request: ` +
			strings.Join(e2eRefusal(carolLastSeen, tc.kind+" "+fleetNS+"/"+tc.name), "\n")
		if got := strings.TrimSpace(stderr); got != want {
			t.Errorf("kubectl patch %s %s to 1.37:\n%s\nwant:\n%s", tc.resource, tc.name, got, want)
		}
	}
	requireVersion(ctx, t, dyn, capiClusters, clusterName, "v1.36.3", "spec", "topology", "version")
	requireVersion(ctx, t, dyn, kcps, "e2e-control-plane", "v1.36.3", "spec", "version")
	requireVersion(ctx, t, dyn, eksClusters, "e2e-eks", "1.36", "spec", "version")

	// legacy's only caller of the removed API has been silent longer than
	// gate.cleanFor: the verdict without it says NOT SAFE, the gate with it
	// lets the bump through.
	var legacyCheck gateUpgradeCheck
	must(t, "the upgrade check of "+legacyCluster, getSunsetJSONErr(s, a.tokens["admin"], "/apis/sunset.dev/v1/upgradechecks/1.37?cluster="+legacyCluster, &legacyCheck))
	if st := legacyCheck.Status; st.ExitCode != exitRemoved || st.Message != legacyVerdict {
		t.Errorf("upgradechecks/1.37?cluster=%s: exit code %d, %q; want %d, %q", legacyCluster, st.ExitCode, st.Message, exitRemoved, legacyVerdict)
	}
	var erin []string
	for _, f := range legacyCheck.Status.Findings {
		for _, c := range f.Callers {
			erin = append(erin, fmt.Sprintf("%s %s %v %s stopped=%v", f.Name, c.UserName, c.UserAgents, c.LastSeen.UTC().Format(time.RFC3339), c.Stopped))
		}
	}
	if want := []string{fmt.Sprintf("%s erin [erin-cli/1.4] %s stopped=false", vacAPI, erinLastSeen.Format(time.RFC3339))}; !slices.Equal(erin, want) {
		t.Errorf("upgradechecks/1.37?cluster=%s: callers %q, want %q", legacyCluster, erin, want)
	}

	// Allowed: a patch release, silently; a cluster whose callers use only
	// deprecated APIs, e2e's step to 1.36, where VolumeAttributesClass is
	// deprecated but not yet removed, and legacy, whose caller of it
	// stopped, each with a kubectl warning per API and one that says
	// nothing removed is called.
	for _, tc := range []struct {
		name, version string
		warnings      []string
	}{
		{clusterName, "v1.36.4", nil},
		{"staging", "v1.37.0", []string{csWarning + "dave", "sunset: allowed: nothing removed by 1.37 is still called"}},
		{"e2e-canary", "v1.36.0", []string{vacWarning + ": 2 requests in the last 24h by carol", csWarning + "carol", "sunset: allowed: nothing removed by 1.36 is still called"}},
		{legacyCluster, "v1.37.0", []string{vacWarning + ": every caller has stopped or is exempted", "sunset: allowed: nothing removed by 1.37 is still called"}},
	} {
		_, stderr, err := kubectlOut(t, adminKubeconfig, "-n", fleetNS, "patch", "clusters.cluster.x-k8s.io", tc.name, "--type=merge",
			"-p", `{"spec":{"topology":{"version":"`+tc.version+`"}}}`)
		if err != nil {
			t.Errorf("kubectl patch cluster %s to %s: %v\n%s", tc.name, tc.version, err, stderr)
			continue
		}
		requireVersion(ctx, t, dyn, capiClusters, tc.name, tc.version, "spec", "topology", "version")
		if got := kubectlWarnings(stderr); !slices.Equal(got, tc.warnings) {
			t.Errorf("kubectl patch cluster %s to %s: warnings\n%q\nwant\n%q", tc.name, tc.version, got, tc.warnings)
		}
	}

	// The override, with its reason, lets e2e's bump through, first as a
	// dry run, then for real, each with one warning line that quotes the
	// reason and the refusal (kube-apiserver drops a warning holding a
	// newline). Both are counted; only the real one is kept and listed by
	// the upgrade check.
	const overrideReason = "CHG-1234: carol's client moves to storage.k8s.io/v1 with this release"
	_, stderr, err = kubectlOut(t, adminKubeconfig, "-n", fleetNS, "annotate", "clusters.cluster.x-k8s.io", clusterName,
		"sunset.dev/upgrade-override="+overrideReason)
	must(t, "annotating the override: "+stderr, err)
	wantOverride := []string{"sunset: allowed by sunset.dev/upgrade-override " + strconv.Quote(overrideReason) + "; without it: " +
		strings.Join(e2eRefusal(carolLastSeen, "Cluster "+fleetNS+"/"+clusterName), "; ")}
	for _, dryRun := range []bool{true, false} {
		args := []string{"-n", fleetNS, "patch", "clusters.cluster.x-k8s.io", clusterName, "--type=merge", "-p", patchVersion}
		if dryRun {
			args = append(args, "--dry-run=server")
		}
		_, stderr, err = kubectlOut(t, adminKubeconfig, args...)
		must(t, fmt.Sprintf("kubectl patch with the override (dry run %v): %s", dryRun, stderr), err)
		if got := kubectlWarnings(stderr); !slices.Equal(got, wantOverride) {
			t.Errorf("kubectl patch with the override (dry run %v): warnings\n%q\nwant\n%q", dryRun, got, wantOverride)
		}
	}
	requireVersion(ctx, t, dyn, capiClusters, clusterName, "v1.37.0", "spec", "topology", "version")
	var overrides struct {
		Status struct {
			GateOverrides []struct {
				Cluster   string `json:"cluster"`
				Source    string `json:"source"`
				Kind      string `json:"kind"`
				Namespace string `json:"namespace"`
				Name      string `json:"name"`
				User      string `json:"user"`
				Reason    string `json:"reason"`
				From      string `json:"fromVersion"`
				To        string `json:"toVersion"`
			} `json:"gateOverrides"`
		} `json:"status"`
	}
	must(t, "the upgrade check of "+clusterName, getSunsetJSONErr(s, a.tokens["admin"], "/apis/sunset.dev/v1/upgradechecks/1.37?cluster="+clusterName, &overrides))
	var kept []string
	for _, o := range overrides.Status.GateOverrides {
		kept = append(kept, fmt.Sprintf("%s %s %s %s/%s %s %q %s->%s", o.Cluster, o.Source, o.Kind, o.Namespace, o.Name, o.User, o.Reason, o.From, o.To))
	}
	if want := []string{fmt.Sprintf("e2e admission Cluster %s/e2e admin %q 1.36.4->1.37.0", fleetNS, overrideReason)}; !slices.Equal(kept, want) {
		t.Errorf("upgradechecks/1.37?cluster=%s: gateOverrides\n%q\nwant\n%q", clusterName, kept, want)
	}
	// Allowed twice: the patch release, and the annotation, which leaves
	// the version alone.
	after := gateReviews(t, s, a.tokens["admin"])
	want := map[string]float64{"refused": 4, "allowed": 2, "warned": 3, "overridden": 2}
	for decision, n := range want {
		if got := after[decision] - before[decision]; got != n {
			t.Errorf("sunset_gate_reviews_total{source=\"admission\",decision=%q} rose by %v, want %v (before %v, after %v)", decision, got, n, before, after)
		}
	}
	if after["error"] != 0 {
		t.Errorf("the gate answered %v reviews with an error", after["error"])
	}

	runArgoPreSyncCheck(ctx, t, a, dyn, mapper, sunsetBin)
}

// e2eRefusal is the gate's refusal of cluster e2e's bump to 1.37 of the
// object what, line by line: carol was last seen in the hour lastSeen.
func e2eRefusal(lastSeen time.Time, what string) []string {
	return []string{
		"sunset: the upgrade of cluster e2e from 1.36 to 1.37 is refused: " + e2eVerdict,
		"- storage.k8s.io/v1beta1 VolumeAttributesClass is deprecated in v1.34+, unavailable in v1.37+; use storage.k8s.io/v1 VolumeAttributesClass: " +
			"2 requests in the last 24h by carol (" + carolAgent + "; last seen " + lastSeen.Format("2006-01-02 15:04") + " UTC)",
		"To upgrade anyway, annotate " + what + ` with sunset.dev/upgrade-override="<reason>".`,
	}
}

// installCRDs creates every CRD of dir's YAML files, want of them, and
// waits until each is served.
func installCRDs(ctx context.Context, t *testing.T, dyn dynamic.Interface, mapper meta.RESTMapper, dir string, want int) {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	must(t, "listing the CRDs", err)
	installed := 0
	for _, f := range files {
		raw, err := os.ReadFile(f)
		must(t, "reading "+f, err)
		for _, obj := range decodeObjects(t, f, raw) {
			applyObject(ctx, t, dyn, mapper, obj, "e2e-crds")
			waitFor(t, "CRD "+obj.GetName()+" to be established", time.Minute, func() error { return established(ctx, dyn, obj.GetName()) })
			installed++
		}
	}
	if installed != want {
		t.Fatalf("%s: installed %d CRDs, want %d", dir, installed, want)
	}
	if r, ok := mapper.(interface{ Reset() }); ok {
		r.Reset()
	}
}

// bindClusterAdmin lets user do anything, as the traffic's users may.
func bindClusterAdmin(ctx context.Context, t *testing.T, admin *kubernetes.Clientset, user string) {
	t.Helper()
	_, err := admin.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "e2e-gate-" + user},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "cluster-admin"},
		Subjects:   []rbacv1.Subject{{APIGroup: "rbac.authorization.k8s.io", Kind: "User", Name: user}},
	}, metav1.CreateOptions{})
	must(t, "binding "+user, err)
	// RBAC reads bindings through an informer: until it has this one, the
	// user's first call may still be refused.
	waitFor(t, "the binding of "+user+" to take effect", 30*time.Second, func() error {
		r, err := admin.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
			User: user, ResourceAttributes: &authorizationv1.ResourceAttributes{Verb: "list", Resource: "componentstatuses"}}}, metav1.CreateOptions{})
		switch {
		case err != nil:
			return err
		case !r.Status.Allowed:
			return fmt.Errorf("not allowed yet: %s", r.Status.Reason)
		}
		return nil
	})
}

// postStagingTraffic posts, as cluster staging's apiserver, one batch of
// kube-apiserver's shape: dave lists componentstatuses (deprecated, never
// removed) and gets a pod, a read as every cluster sends.
func postStagingTraffic(t *testing.T, s *sunsetServer, p *pki, token string) {
	t.Helper()
	now := time.Now()
	postClusterTraffic(t, s, p, token, "staging",
		batchEvent{id: "5f0c2a4e-1f4b-4a8e-9d3c-000000000001", user: "dave", agent: "dave-cli/2.1", verb: "list",
			uri: "/api/v1/componentstatuses", resource: "componentstatuses", version: "v1", deprecated: true, at: now},
		batchEvent{id: "5f0c2a4e-1f4b-4a8e-9d3c-000000000002", user: "dave", agent: "dave-cli/2.1", verb: "get",
			uri: "/api/v1/namespaces/default/pods/web-0", resource: "pods", version: "v1", name: "web-0", at: now})
}

// postLegacyTraffic posts, as cluster legacy's apiserver, erin's list of
// volumeattributesclasses (removed in 1.37) of 3h ago, within the store's
// retention, and a get of a pod now, so that legacy is heard, reads
// included. It returns the hour erin was last seen.
func postLegacyTraffic(t *testing.T, s *sunsetServer, p *pki, token string) time.Time {
	t.Helper()
	now := time.Now()
	then := now.Add(-3 * time.Hour)
	postClusterTraffic(t, s, p, token, legacyCluster,
		batchEvent{id: "5f0c2a4e-1f4b-4a8e-9d3c-000000000101", user: "erin", agent: "erin-cli/1.4", verb: "list",
			uri: "/apis/storage.k8s.io/v1beta1/volumeattributesclasses", resource: "volumeattributesclasses", group: "storage.k8s.io",
			version: "v1beta1", deprecated: true, removedRelease: "1.37", at: then},
		batchEvent{id: "5f0c2a4e-1f4b-4a8e-9d3c-000000000102", user: "frank", agent: "frank-cli/3.0", verb: "get",
			uri: "/api/v1/namespaces/default/pods/db-0", resource: "pods", version: "v1", name: "db-0", at: now})
	return then.UTC().Truncate(time.Hour)
}

// batchEvent is one audit.k8s.io/v1 event of a hand-built batch.
type batchEvent struct {
	id, user, agent, verb, uri     string
	group, version, resource, name string
	deprecated                     bool
	removedRelease                 string
	at                             time.Time
}

// postClusterTraffic posts events as one batch of kube-apiserver's shape,
// as cluster's apiserver, with the client certificate such an apiserver
// has.
func postClusterTraffic(t *testing.T, s *sunsetServer, p *pki, token, cluster string, events ...batchEvent) {
	t.Helper()
	var items []string
	for _, e := range events {
		ann := map[string]string{}
		if e.deprecated {
			ann["k8s.io/deprecated"] = "true"
		}
		if e.removedRelease != "" {
			ann["k8s.io/removed-release"] = e.removedRelease
		}
		at := e.at.UTC().Format(time.RFC3339Nano)
		item, err := json.Marshal(map[string]any{
			"level": "Metadata", "auditID": e.id, "stage": "ResponseComplete", "requestURI": e.uri, "verb": e.verb,
			"user":      map[string]any{"username": e.user, "groups": []string{"developers", "system:authenticated"}},
			"sourceIPs": []string{"192.0.2.30"}, "userAgent": e.agent,
			"objectRef":                map[string]any{"resource": e.resource, "name": e.name, "apiGroup": e.group, "apiVersion": e.version},
			"responseStatus":           map[string]any{"metadata": map[string]any{}, "code": 200},
			"requestReceivedTimestamp": at, "stageTimestamp": at, "annotations": ann,
		})
		must(t, "encoding an event", err)
		items = append(items, string(item))
	}
	body := `{"kind":"EventList","apiVersion":"audit.k8s.io/v1","items":[` + strings.Join(items, ",") + `]}`
	cert, key := p.issue(t, cluster+"-apiserver-webhook-client", nodeName, false, cluster)
	req, err := http.NewRequest(http.MethodPost, s.url+"/audit/webhook/"+cluster+"/"+nodeName, strings.NewReader(body))
	must(t, "request", err)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := p.httpsClient(cert, key).Do(req)
	must(t, "posting "+cluster+"'s batch", err)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("posting %s's batch: %s", cluster, resp.Status)
	}
}

// gateUpgradeCheck is what the gate test reads of an UpgradeCheck.
type gateUpgradeCheck struct {
	Status struct {
		ExitCode int    `json:"exitCode"`
		Message  string `json:"message"`
		Findings []struct {
			Name    string `json:"name"`
			Callers []struct {
				UserName   string    `json:"username"`
				UserAgents []string  `json:"userAgents"`
				LastSeen   time.Time `json:"lastSeen"`
				Stopped    bool      `json:"stopped"`
			} `json:"callers"`
		} `json:"findings"`
		Exemptions        []exemption `json:"exemptions"`
		ExpiredExemptions []exemption `json:"expiredExemptions"`
	} `json:"status"`
}

// exemption is one of an UpgradeCheck's exemptions.
type exemption struct {
	API       string    `json:"api"`
	UserName  string    `json:"user"`
	UserAgent string    `json:"userAgent"`
	Reason    string    `json:"reason"`
	Expires   time.Time `json:"expires"`
}

// exitRemoved is the upgrade check's exit code when a removed API is
// still requested.
const exitRemoved = 3

// gateReviews reads sunset_gate_reviews_total of the admission webhook,
// by decision.
func gateReviews(t *testing.T, s *sunsetServer, bearer string) map[string]float64 {
	t.Helper()
	out := map[string]float64{}
	for _, m := range scrape(t, s.client, s.url+"/metrics", bearer)["sunset_gate_reviews_total"].GetMetric() {
		if label(m, "source") == "admission" {
			out[label(m, "decision")] += m.GetCounter().GetValue()
		}
	}
	return out
}

// getSunsetJSONErr reads one of Sunset's JSON answers with a bearer
// token, returning what went wrong.
func getSunsetJSONErr(s *sunsetServer, bearer, path string, out any) error {
	req, err := http.NewRequest(http.MethodGet, s.url+path, nil)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+bearer)
	resp, err := s.client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", path, resp.Status)
	}
	return json.NewDecoder(resp.Body).Decode(out)
}

// kubectlOut runs kubectl with a kubeconfig, returning what it wrote to
// standard output and standard error: kubectl prints admission warnings
// on standard error, as `Warning: ...`, also when the command succeeds.
func kubectlOut(t *testing.T, kubeconfig string, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	cmd := exec.Command(kubectlBinary(t), append([]string{"--kubeconfig=" + kubeconfig}, args...)...)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err = cmd.Run()
	return out.String(), errOut.String(), err
}

// kubectlWarnings are the admission warnings kubectl printed.
func kubectlWarnings(stderr string) []string {
	var out []string
	for _, line := range strings.Split(stderr, "\n") {
		if w, ok := strings.CutPrefix(line, "Warning: "); ok {
			out = append(out, w)
		}
	}
	return out
}

// requireVersion checks the version field of a stored object.
func requireVersion(ctx context.Context, t *testing.T, dyn dynamic.Interface, gvr schema.GroupVersionResource, name, want string, path ...string) {
	t.Helper()
	obj, err := dyn.Resource(gvr).Namespace(fleetNS).Get(ctx, name, metav1.GetOptions{})
	must(t, "reading "+gvr.Resource+" "+name, err)
	got, _, _ := unstructured.NestedString(obj.Object, path...)
	if got != want {
		t.Errorf("%s %s: %s is %q, want %q", gvr.Resource, name, strings.Join(path, "."), got, want)
	}
}

// runArgoPreSyncCheck applies deploy/pipeline/argocd-presync.yaml as
// shipped, then runs its Job's container here as kubelet would: its
// command and arguments, with the ServiceAccount's token and CA where the
// Job's kubeconfig names them, and that kubeconfig's server replaced by
// the test's kube-apiserver. Bound to sunset:view alone, it reads Sunset
// through the APIService and refuses cluster e2e's bump to v1.37.0 (exit
// 3) naming carol.
func runArgoPreSyncCheck(ctx context.Context, t *testing.T, a *apiserver, dyn dynamic.Interface, mapper meta.RESTMapper, sunsetBin string) {
	t.Helper()
	raw, err := os.ReadFile(shippedArgoPreSync)
	must(t, "reading "+shippedArgoPreSync, err)
	var job *unstructured.Unstructured
	var kubeconfig string
	for _, obj := range decodeObjects(t, shippedArgoPreSync, raw) {
		applyObject(ctx, t, dyn, mapper, obj, "e2e-argocd")
		switch obj.GetKind() {
		case "Job":
			job = obj
		case "ConfigMap":
			kubeconfig, _, _ = unstructured.NestedString(obj.Object, "data", "kubeconfig")
		}
	}
	if job == nil || kubeconfig == "" {
		t.Fatalf("%s has no Job or no kubeconfig", shippedArgoPreSync)
	}
	podSpec, _, _ := unstructured.NestedMap(job.Object, "spec", "template", "spec")
	account := podSpec["serviceAccountName"].(string)
	containers := podSpec["containers"].([]any)
	c := containers[0].(map[string]any)
	var args []string
	for _, arg := range c["args"].([]any) {
		args = append(args, arg.(string))
	}

	admin := a.as(t, "admin", "e2e-setup/1.0")
	tok, err := admin.CoreV1().ServiceAccounts(job.GetNamespace()).CreateToken(ctx, account, &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
	must(t, "a token for "+account, err)
	dir := t.TempDir()
	cfg, err := clientcmd.Load([]byte(kubeconfig))
	must(t, "the Job's kubeconfig", err)
	for _, cl := range cfg.Clusters {
		cl.Server = a.url
		cl.CertificateAuthority = a.caFile
	}
	for _, u := range cfg.AuthInfos {
		u.TokenFile = filepath.Join(dir, "token")
	}
	must(t, "token file", os.WriteFile(filepath.Join(dir, "token"), []byte(tok.Status.Token), 0o600))
	must(t, "kubeconfig", clientcmd.WriteToFile(*cfg, filepath.Join(dir, "kubeconfig")))
	for i, arg := range args {
		switch {
		case strings.HasPrefix(arg, "--kubeconfig="):
			args[i] = "--kubeconfig=" + filepath.Join(dir, "kubeconfig")
		case strings.HasPrefix(arg, "--cluster="):
			// The shipped Job names cluster prod; here it is e2e.
			args[i] = "--cluster=" + clusterName
		}
	}
	cmd := exec.CommandContext(ctx, sunsetBin, args...)
	cmd.Env = []string{"HOME=" + dir}
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 3 {
		t.Fatalf("the PreSync Job's sunset %s: %v, want exit 3 (removed APIs called):\n%s", strings.Join(args, " "), err, out)
	}
	want := "Warning: storage.k8s.io/v1beta1 VolumeAttributesClass is deprecated in v1.34+, unavailable in v1.37+; use storage.k8s.io/v1 VolumeAttributesClass (2 requests in 24h by 1 client: carol)\n" +
		"Warning: v1 ComponentStatus is deprecated in v1.19+ (1 request in 24h by 1 client: carol)\n" +
		"NOT SAFE to upgrade to 1.37: 1 API removed in or before 1.37 was requested in the last 24h, system users excluded.\n"
	if string(out) != want {
		t.Errorf("the PreSync Job's check printed:\n%s\nwant:\n%s", out, want)
	}
}
