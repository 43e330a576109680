package e2e

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	admissionclient "k8s.io/client-go/kubernetes/typed/admissionregistration/v1"
)

// The admission webhooks of the test, served by the test itself.
const (
	gadgetGroup       = "admission.e2e.example.com"
	mutatorConfig     = "e2e-slow-mutator"
	mutatorWebhook    = "slow-mutator.admission.e2e.example.com"
	validatorConfig   = "e2e-failing-validator"
	validatorWebhook  = "failing-validator.admission.e2e.example.com"
	mutatorDelay      = 1200 * time.Millisecond
	mutateLabel       = "e2e.example.com/mutate"
	mutatedAnnotation = "e2e.example.com/mutated-by"
)

var gadgetsV1beta1 = schema.GroupVersionResource{Group: gadgetGroup, Version: "v1beta1", Resource: "gadgets"}

// A real kube-apiserver calls two admission webhooks served by the test: a
// mutating one on a CRD that answers after 1.2 s (and patches objects that
// ask for it), and a validating one on the CRD and on secrets that always
// fails, with failurePolicy: Ignore. Sunset's webhook counts, read through
// its API, must equal what the apiserver's own audit log file shows, and
// the audit log must agree with what the webhook server received.
func TestAdmissionWebhookCountsEqualTheAuditLog(t *testing.T) {
	sunsetBin, apiserverBin, etcdBin := peerBinaries(t)

	p := newPKI(t)
	s, token := startSunset(t, sunsetBin, p)
	kubeconfig := webhookKubeconfig(t, p, s.url+"/audit/webhook/"+clusterName+"/"+nodeName, token)
	a := startAPIServer(t, apiserverBin, startEtcd(t, etcdBin, p), p, kubeconfig)
	hooks := startAdmissionServer(t, p)

	ctx := ctxWithin(t, 5*time.Minute)
	admin := a.as(t, "admin", "e2e-admission/1.0")
	dyn, err := dynamic.NewForConfig(a.config(a.tokens["admin"], "e2e-admission/1.0"))
	must(t, "dynamic client", err)
	_, err = dyn.Resource(crds).Create(ctx, deprecatedCRD(gadgetGroup, "Gadget"), metav1.CreateOptions{})
	must(t, "creating the gadgets CRD", err)
	_, err = admin.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: trafficNS}}, metav1.CreateOptions{})
	must(t, "creating namespace", err)
	gadgets := dyn.Resource(gadgetsV1beta1).Namespace(trafficNS)
	waitFor(t, "gadgets to be served", time.Minute, func() error {
		_, err := gadgets.List(ctx, metav1.ListOptions{})
		return err
	})
	hooks.register(ctx, t, admin.AdmissionregistrationV1())

	// The apiserver picks webhook configurations up asynchronously: dry
	// runs, which webhooks with sideEffects: None see, probe until both
	// webhooks have been called. Their annotations are in the audit log
	// like everything else.
	probe := gadget("probe", false)
	waitFor(t, "the apiserver to call both webhooks", time.Minute, func() error {
		_, err := gadgets.Create(ctx, probe, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		if err != nil {
			return err
		}
		if hooks.mutateCalls.Load() == 0 || hooks.validateCalls.Load() == 0 {
			return errNotYet
		}
		return nil
	})

	for i := range 3 {
		_, err := gadgets.Create(ctx, gadget(fmt.Sprintf("g-%d", i), i == 0), metav1.CreateOptions{})
		must(t, "creating a gadget", err)
	}
	g0, err := gadgets.Get(ctx, "g-0", metav1.GetOptions{})
	must(t, "getting a gadget", err)
	must(t, "setting spec", unstructured.SetNestedField(g0.Object, "large", "spec", "size"))
	_, err = gadgets.Update(ctx, g0, metav1.UpdateOptions{})
	must(t, "updating a gadget", err)
	must(t, "deleting a gadget", gadgets.Delete(ctx, "g-2", metav1.DeleteOptions{}))
	_, err = gadgets.List(ctx, metav1.ListOptions{})
	must(t, "listing gadgets", err)
	for i := range 2 {
		_, err := admin.CoreV1().Secrets(trafficNS).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("s-%d", i)},
			StringData: map[string]string{"password": "never-in-sunset"}}, metav1.CreateOptions{})
		must(t, "creating a secret", err)
	}

	// Stopping the apiserver flushes its audit buffers: its log is then
	// complete, and its last batches are on their way to Sunset.
	a.proc.stop(t, syscall.SIGTERM, 2*time.Minute)
	truth, deprecatedGadgets := admissionTruth(t, a.auditLog)

	// The audit log holds what the webhook server saw: every mutating call
	// is annotated, and every validating call failed open.
	mutator := truth.webhooks[webhookOnResource{mutatorConfig + "." + mutatorWebhook, "gadgets.v1beta1." + gadgetGroup}]
	validatorOnGadgets := truth.webhooks[webhookOnResource{validatorWebhook, "gadgets.v1beta1." + gadgetGroup}]
	validatorOnSecrets := truth.webhooks[webhookOnResource{validatorWebhook, "secrets.v1"}]
	if mutator.Calls != hooks.mutateCalls.Load() || mutator.Mutations != hooks.patches.Load() || mutator.Mutations != 1 {
		t.Errorf("audit log: %s: %+v; the webhook server answered %d calls, %d with a patch (the test's 1)",
			mutatorWebhook, mutator, hooks.mutateCalls.Load(), hooks.patches.Load())
	}
	// 3 creates and an update after the probes.
	if mutator.Slow != mutator.Requests || mutator.Buckets[2] != mutator.Requests || mutator.Requests < 4 {
		t.Errorf("audit log: %s: %+v; want every request slowed by 1.2 s to 2 s, at least the test's 4", mutatorWebhook, mutator)
	}
	if got := validatorOnGadgets.FailedOpen + validatorOnSecrets.FailedOpen; got != hooks.validateCalls.Load() ||
		validatorOnSecrets != (admissionCounts{Requests: 2, Calls: 2, FailedOpen: 2}) {
		t.Errorf("audit log: %s failed open %d times (%+v on secrets); the webhook server failed %d calls, 2 of them the test's secrets",
			validatorWebhook, got, validatorOnSecrets, hooks.validateCalls.Load())
	}
	if t.Failed() {
		t.FailNow()
	}

	var got admissionTally
	waitFor(t, "Sunset's webhook counts to equal the audit log", time.Minute, func() error {
		got = sunsetAdmission(t, s, "")
		if problems := slices.Concat(diff("webhook on resource", truth.webhooks, got.webhooks),
			diff("resource", truth.resources, got.resources)); len(problems) > 0 {
			return fmt.Errorf("\n%s", strings.Join(problems, "\n"))
		}
		return nil
	})

	// ?class=security keeps secrets, and the one webhook on them.
	security := sunsetAdmission(t, s, "security")
	want := admissionTally{webhooks: map[webhookOnResource]admissionCounts{{validatorWebhook, "secrets.v1"}: validatorOnSecrets},
		resources: map[string]admissionCounts{"secrets.v1": truth.resources["secrets.v1"]}}
	if problems := slices.Concat(diff("security webhook on resource", want.webhooks, security.webhooks),
		diff("security resource", want.resources, security.resources)); len(problems) > 0 {
		t.Errorf("?class=security:\n%s", strings.Join(problems, "\n"))
	}

	// The gadgets went through v1beta1, which the CRD deprecates: the same
	// requests count once in the deprecation counter too.
	if n := sunsetRequestCount(t, s, "gadgets.v1beta1."+gadgetGroup); n != deprecatedGadgets {
		t.Errorf("deprecated gadgets.v1beta1 requests: Sunset %d, audit log %d", n, deprecatedGadgets)
	}
	t.Logf("Sunset equals the audit log: %d requests with webhook annotations over %d resources; %s: %+v",
		totalRequests(truth), len(truth.resources), mutatorWebhook, mutator)
}

func totalRequests(tl admissionTally) int64 {
	var n int64
	for _, c := range tl.resources {
		n += c.Requests
	}
	return n
}

func gadget(name string, mutate bool) *unstructured.Unstructured {
	meta := map[string]any{"name": name}
	if mutate {
		meta["labels"] = map[string]any{mutateLabel: "yes"}
	}
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": gadgetGroup + "/v1beta1", "kind": "Gadget", "metadata": meta, "spec": map[string]any{"size": "small"},
	}}
}

// admissionServer is the webhook server the apiserver calls, over TLS with
// a certificate from the test CA.
type admissionServer struct {
	url                                 string
	caPEM                               []byte
	mutateCalls, patches, validateCalls atomic.Int64
}

func startAdmissionServer(t *testing.T, p *pki) *admissionServer {
	t.Helper()
	certFile, keyFile := p.issue(t, "admission-webhook", "admission-webhook", true)
	pair, err := tls.LoadX509KeyPair(certFile, keyFile)
	must(t, "loading the webhook certificate", err)
	ca, err := os.ReadFile(p.CAFile)
	must(t, "reading the CA", err)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	must(t, "listening", err)
	hs := &admissionServer{url: "https://127.0.0.1:" + strconv.Itoa(ln.Addr().(*net.TCPAddr).Port), caPEM: ca}
	mux := http.NewServeMux()
	mux.HandleFunc("/mutate", hs.mutate)
	mux.HandleFunc("/validate", func(w http.ResponseWriter, _ *http.Request) {
		hs.validateCalls.Add(1)
		http.Error(w, "the e2e validator always fails", http.StatusInternalServerError)
	})
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second,
		TLSConfig: &tls.Config{Certificates: []tls.Certificate{pair}, MinVersion: tls.VersionTLS12}}
	go func() { _ = srv.ServeTLS(ln, "", "") }()
	t.Cleanup(func() { _ = srv.Close() })
	return hs
}

// mutate answers after mutatorDelay, the slow webhook being tested; the
// timer is the webhook's behaviour, not a wait of the test. Objects
// labelled to be mutated get an annotation, once.
func (hs *admissionServer) mutate(w http.ResponseWriter, r *http.Request) {
	hs.mutateCalls.Add(1)
	var review admissionv1.AdmissionReview
	body, err := io.ReadAll(r.Body)
	if err == nil {
		err = json.Unmarshal(body, &review)
	}
	if err != nil || review.Request == nil {
		http.Error(w, "not an AdmissionReview", http.StatusBadRequest)
		return
	}
	slow := time.NewTimer(mutatorDelay)
	defer slow.Stop()
	select {
	case <-slow.C:
	case <-r.Context().Done():
		return
	}
	resp := &admissionv1.AdmissionResponse{UID: review.Request.UID, Allowed: true}
	var obj struct {
		Metadata struct {
			Labels      map[string]string `json:"labels"`
			Annotations map[string]string `json:"annotations"`
		} `json:"metadata"`
	}
	if json.Unmarshal(review.Request.Object.Raw, &obj) == nil && obj.Metadata.Labels[mutateLabel] == "yes" &&
		obj.Metadata.Annotations[mutatedAnnotation] == "" {
		patch := `[{"op":"add","path":"/metadata/annotations","value":{"` + mutatedAnnotation + `":"` + mutatorWebhook + `"}}]`
		pt := admissionv1.PatchTypeJSONPatch
		resp.Patch, resp.PatchType = []byte(patch), &pt
		hs.patches.Add(1)
	}
	review.Response, review.Request = resp, nil
	out, _ := json.Marshal(review)
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(out)
}

// register creates the two webhook configurations.
func (hs *admissionServer) register(ctx context.Context, t *testing.T, client admissionclient.AdmissionregistrationV1Interface) {
	t.Helper()
	none := admissionregistrationv1.SideEffectClassNone
	fail, ignore := admissionregistrationv1.Fail, admissionregistrationv1.Ignore
	timeout := int32(10)
	gadgetRule := admissionregistrationv1.Rule{APIGroups: []string{gadgetGroup}, APIVersions: []string{"*"}, Resources: []string{"gadgets"}}
	url := func(path string) *string { u := hs.url + path; return &u }
	_, err := client.MutatingWebhookConfigurations().Create(ctx, &admissionregistrationv1.MutatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: mutatorConfig},
		Webhooks: []admissionregistrationv1.MutatingWebhook{{
			Name:         mutatorWebhook,
			ClientConfig: admissionregistrationv1.WebhookClientConfig{URL: url("/mutate"), CABundle: hs.caPEM},
			Rules: []admissionregistrationv1.RuleWithOperations{{Rule: gadgetRule,
				Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create, admissionregistrationv1.Update}}},
			FailurePolicy: &fail, SideEffects: &none, TimeoutSeconds: &timeout, AdmissionReviewVersions: []string{"v1"},
		}},
	}, metav1.CreateOptions{})
	must(t, "creating the mutating webhook configuration", err)
	_, err = client.ValidatingWebhookConfigurations().Create(ctx, &admissionregistrationv1.ValidatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: validatorConfig},
		Webhooks: []admissionregistrationv1.ValidatingWebhook{{
			Name:         validatorWebhook,
			ClientConfig: admissionregistrationv1.WebhookClientConfig{URL: url("/validate"), CABundle: hs.caPEM},
			Rules: []admissionregistrationv1.RuleWithOperations{
				{Rule: gadgetRule, Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create,
					admissionregistrationv1.Update, admissionregistrationv1.Delete}},
				{Rule: admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"secrets"}},
					Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create}},
			},
			FailurePolicy: &ignore, SideEffects: &none, TimeoutSeconds: &timeout, AdmissionReviewVersions: []string{"v1"},
		}},
	}, metav1.CreateOptions{})
	must(t, "creating the validating webhook configuration", err)
}
