// Package capihook is the upgrade gate as a Cluster API runtime
// extension: it answers Discovery with two handlers named sunset-gate,
// for BeforeClusterUpgrade and BeforeControlPlaneUpgrade, and holds an
// upgrade (retryAfterSeconds) while package gate refuses it.
//
// The request and response types are Cluster API's own
// (sigs.k8s.io/cluster-api/api/runtime/hooks/v1alpha1), so that the wire
// format is the one its runtime client speaks. Registering the extension
// (ExtensionConfig) is the deployment's business.
package capihook

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/rs/zerolog"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	runtimecatalog "sigs.k8s.io/cluster-api/api/runtime/catalog"
	hooksv1 "sigs.k8s.io/cluster-api/api/runtime/hooks/v1alpha1"

	"github.com/kube-sunset/sunset/gate"
	"github.com/kube-sunset/sunset/gate/kubeversion"
)

// Prefix is where the hooks are served: the ExtensionConfig's
// spec.clientConfig.service.path.
const Prefix = "/gate/capi"

// HandlerName names both handlers in Discovery and in their paths.
const HandlerName = "sunset-gate"

// DefaultRetryAfter is how long Cluster API waits before it asks again
// about a refused upgrade.
const DefaultRetryAfter = 5 * time.Minute

// timeoutSeconds is what Discovery asks Cluster API to wait for an
// answer; a verdict reads the store only.
const timeoutSeconds = 10

// maxBodyBytes bounds a request: a Cluster and a few strings.
const maxBodyBytes = 4 << 20

// Options configure a Handler. Gate is required.
type Options struct {
	Gate *gate.Gate
	// RetryAfter: 0 means DefaultRetryAfter.
	RetryAfter time.Duration
	Logger     zerolog.Logger
}

// Handler serves the hooks.
type Handler struct {
	gate       *gate.Gate
	retryAfter int32
	log        zerolog.Logger
}

// New builds a Handler.
func New(opts Options) *Handler {
	if opts.RetryAfter <= 0 {
		opts.RetryAfter = DefaultRetryAfter
	}
	return &Handler{gate: opts.Gate, retryAfter: int32(min(opts.RetryAfter/time.Second, 1<<30)),
		log: opts.Logger.With().Str("component", "gate").Str("source", string(gate.SourceCAPI)).Logger()}
}

func gvh(hook runtimecatalog.Hook) runtimecatalog.GroupVersionHook {
	return runtimecatalog.GroupVersionHook{Group: hooksv1.GroupVersion.Group, Version: hooksv1.GroupVersion.Version, Hook: runtimecatalog.HookName(hook)}
}

// Paths of the three hooks under Prefix, as Cluster API's runtime client
// builds them.
var (
	DiscoveryPath                 = Prefix + runtimecatalog.GVHToPath(gvh(hooksv1.Discovery), "")
	BeforeClusterUpgradePath      = Prefix + runtimecatalog.GVHToPath(gvh(hooksv1.BeforeClusterUpgrade), HandlerName)
	BeforeControlPlaneUpgradePath = Prefix + runtimecatalog.GVHToPath(gvh(hooksv1.BeforeControlPlaneUpgrade), HandlerName)
)

// Register adds the hooks to mux.
func (h *Handler) Register(mux *http.ServeMux) {
	mux.HandleFunc("POST "+DiscoveryPath, h.discovery)
	mux.HandleFunc("POST "+BeforeClusterUpgradePath, h.beforeClusterUpgrade)
	mux.HandleFunc("POST "+BeforeControlPlaneUpgradePath, h.beforeControlPlaneUpgrade)
}

func typeMeta(kind string) metav1.TypeMeta {
	return metav1.TypeMeta{APIVersion: hooksv1.GroupVersion.String(), Kind: kind}
}

func (h *Handler) discovery(w http.ResponseWriter, r *http.Request) {
	var req hooksv1.DiscoveryRequest
	if !h.read(w, r, &req, "DiscoveryResponse") {
		return
	}
	timeout, ignore := int32(timeoutSeconds), hooksv1.FailurePolicyIgnore
	handler := func(hook runtimecatalog.Hook) hooksv1.ExtensionHandler {
		return hooksv1.ExtensionHandler{Name: HandlerName, TimeoutSeconds: &timeout, FailurePolicy: &ignore,
			RequestHook: hooksv1.GroupVersionHook{APIVersion: hooksv1.GroupVersion.String(), Hook: runtimecatalog.HookName(hook)}}
	}
	writeJSON(w, http.StatusOK, &hooksv1.DiscoveryResponse{TypeMeta: typeMeta("DiscoveryResponse"),
		CommonResponse: hooksv1.CommonResponse{Status: hooksv1.ResponseStatusSuccess},
		Handlers:       []hooksv1.ExtensionHandler{handler(hooksv1.BeforeClusterUpgrade), handler(hooksv1.BeforeControlPlaneUpgrade)}})
}

// upgradeRequest is what the gate reads of a BeforeClusterUpgrade or
// BeforeControlPlaneUpgrade request: the Cluster's metadata and the two
// versions. The rest of the Cluster is left unread, so that a field a
// newer Cluster API adds or reshapes cannot make the request unreadable,
// which the handler's Ignore policy would turn into an unjudged upgrade.
type upgradeRequest struct {
	Cluster struct {
		Metadata gate.Meta `json:"metadata"`
	} `json:"cluster"`
	FromKubernetesVersion string `json:"fromKubernetesVersion"`
	ToKubernetesVersion   string `json:"toKubernetesVersion"`
}

func (h *Handler) beforeClusterUpgrade(w http.ResponseWriter, r *http.Request) {
	var req upgradeRequest
	if !h.read(w, r, &req, "BeforeClusterUpgradeResponse") {
		return
	}
	resp := h.decide(w, "BeforeClusterUpgradeResponse", req.Cluster.Metadata, req.FromKubernetesVersion, req.ToKubernetesVersion)
	if resp != nil {
		writeJSON(w, http.StatusOK, &hooksv1.BeforeClusterUpgradeResponse{TypeMeta: typeMeta("BeforeClusterUpgradeResponse"), CommonRetryResponse: *resp})
	}
}

func (h *Handler) beforeControlPlaneUpgrade(w http.ResponseWriter, r *http.Request) {
	var req upgradeRequest
	if !h.read(w, r, &req, "BeforeControlPlaneUpgradeResponse") {
		return
	}
	resp := h.decide(w, "BeforeControlPlaneUpgradeResponse", req.Cluster.Metadata, req.FromKubernetesVersion, req.ToKubernetesVersion)
	if resp != nil {
		writeJSON(w, http.StatusOK, &hooksv1.BeforeControlPlaneUpgradeResponse{TypeMeta: typeMeta("BeforeControlPlaneUpgradeResponse"), CommonRetryResponse: *resp})
	}
}

// decide judges the upgrade of the Cluster meta describes. It answers
// errors itself and returns nil then.
func (h *Handler) decide(w http.ResponseWriter, kind string, meta gate.Meta, fromText, toText string) *hooksv1.CommonRetryResponse {
	from, errFrom := kubeversion.Parse(fromText)
	to, errTo := kubeversion.Parse(toText)
	if err := errors.Join(errFrom, errTo); err != nil {
		h.fail(w, kind, http.StatusBadRequest, "fromKubernetesVersion and toKubernetesVersion: "+strings.ReplaceAll(err.Error(), "\n", "; "))
		return nil
	}
	d, err := h.gate.Decide(gate.Request{Source: gate.SourceCAPI, Kind: "Cluster", From: from, To: to, Meta: meta})
	if err != nil {
		// An error, not a Failure: Cluster API applies the handler's
		// failure policy to errors, and never to a Failure.
		h.log.Error().Err(err).Str("namespace", meta.Namespace).Str("name", meta.Name).Msg("could not decide an upgrade; answering with an error")
		writeJSON(w, http.StatusInternalServerError, failure(kind, "sunset could not decide: "+err.Error()))
		return nil
	}
	resp := &hooksv1.CommonRetryResponse{CommonResponse: hooksv1.CommonResponse{Status: hooksv1.ResponseStatusSuccess}}
	if !d.Allowed {
		resp.Message, resp.RetryAfterSeconds = d.Message, h.retryAfter
		return resp
	}
	resp.Message = strings.Join(d.Warnings, "\n")
	return resp
}

// read decodes a request of at most maxBodyBytes into req, answering the
// error itself when it cannot.
func (h *Handler) read(w http.ResponseWriter, r *http.Request, req any, respKind string) bool {
	err := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxBodyBytes)).Decode(req)
	var tooLarge *http.MaxBytesError
	switch {
	case errors.As(err, &tooLarge):
		h.fail(w, respKind, http.StatusRequestEntityTooLarge, fmt.Sprintf("the request is larger than %d bytes", maxBodyBytes))
		return false
	case err != nil:
		h.fail(w, respKind, http.StatusBadRequest, fmt.Sprintf("the body is not a %s request of %s in JSON: %v", strings.TrimSuffix(respKind, "Response"), hooksv1.GroupVersion, err))
		return false
	}
	return true
}

// fail answers a request that could not be read, counted as an error.
func (h *Handler) fail(w http.ResponseWriter, kind string, code int, msg string) {
	h.gate.Failed(gate.SourceCAPI)
	h.log.Warn().Int("code", code).Str("error", msg).Msg("could not read a Cluster API hook request")
	writeJSON(w, code, failure(kind, msg))
}

// failure is a response body with status Failure, which says what went
// wrong to whoever reads an error's body.
func failure(kind, msg string) any {
	return struct {
		metav1.TypeMeta        `json:",inline"`
		hooksv1.CommonResponse `json:",inline"`
	}{typeMeta(kind), hooksv1.CommonResponse{Status: hooksv1.ResponseStatusFailure, Message: msg}}
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}
