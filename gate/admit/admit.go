// Package admit is the upgrade gate's validating admission webhook: it
// reads an admission.k8s.io/v1 AdmissionReview of an object that holds a
// cluster's Kubernetes version, asks package gate, and answers allowed,
// refused with the verdict's message, or allowed with warnings.
//
// It reads only the review's request, the version field of the old and
// new objects, and the new object's metadata. Which objects are sent is
// the ValidatingWebhookConfiguration's business.
package admit

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"unicode"

	"github.com/rs/zerolog"
	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kube-sunset/sunset/gate"
	"github.com/kube-sunset/sunset/gate/kubeversion"
)

// Path is where the webhook is served.
const Path = "/gate/admit"

// DefaultMaxBodyBytes fits an old and a new object of etcd's largest
// (1.5 MiB) with room to spare.
const DefaultMaxBodyBytes = 4 << 20

// Options configure a Handler. Gate and Kinds are required.
type Options struct {
	Gate  *gate.Gate
	Kinds *gate.Kinds
	// MaxBodyBytes bounds a review; 0 means DefaultMaxBodyBytes.
	MaxBodyBytes int64
	Logger       zerolog.Logger
}

// Handler serves the webhook.
type Handler struct {
	gate    *gate.Gate
	kinds   *gate.Kinds
	maxBody int64
	log     zerolog.Logger
}

// New builds a Handler.
func New(opts Options) *Handler {
	if opts.MaxBodyBytes == 0 {
		opts.MaxBodyBytes = DefaultMaxBodyBytes
	}
	return &Handler{gate: opts.Gate, kinds: opts.Kinds, maxBody: opts.MaxBodyBytes,
		log: opts.Logger.With().Str("component", "gate").Str("source", string(gate.SourceAdmission)).Logger()}
}

// Register adds the webhook to mux.
func (h *Handler) Register(mux *http.ServeMux) {
	mux.Handle("POST "+Path, h)
}

// ServeHTTP answers one AdmissionReview.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var review admissionv1.AdmissionReview
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, h.maxBody))
	if err := dec.Decode(&review); err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			h.fail(w, http.StatusRequestEntityTooLarge, fmt.Sprintf("the AdmissionReview is larger than %d bytes: send only objects that hold a Kubernetes version to this webhook", h.maxBody))
			return
		}
		h.fail(w, http.StatusBadRequest, "the body is not an admission.k8s.io/v1 AdmissionReview in JSON: "+err.Error())
		return
	}
	if review.Request == nil || review.Request.UID == "" {
		h.fail(w, http.StatusBadRequest, "the AdmissionReview has no request, or its request no uid: send an admission.k8s.io/v1 AdmissionReview as kube-apiserver does")
		return
	}
	req := review.Request
	resp, err := h.review(req)
	if err != nil {
		// An error, not a refusal: the webhook's failure policy decides.
		h.log.Error().Err(err).Str("uid", string(req.UID)).Str("kind", req.Kind.Kind).Str("namespace", req.Namespace).Str("name", req.Name).
			Msg("could not decide a change; answering with an error, so the webhook's failure policy applies")
		writeJSON(w, http.StatusInternalServerError, failedReview(http.StatusInternalServerError, "sunset could not decide: "+err.Error()))
		return
	}
	resp.UID = req.UID
	writeJSON(w, http.StatusOK, admissionv1.AdmissionReview{TypeMeta: reviewType, Response: resp})
}

var reviewType = metav1.TypeMeta{APIVersion: admissionv1.SchemeGroupVersion.String(), Kind: "AdmissionReview"}

// review decides req.
func (h *Handler) review(req *admissionv1.AdmissionRequest) (*admissionv1.AdmissionResponse, error) {
	allow := func(o gate.Outcome, warnings ...string) (*admissionv1.AdmissionResponse, error) {
		h.gate.Count(gate.SourceAdmission, o)
		return &admissionv1.AdmissionResponse{Allowed: true, Warnings: warnings}, nil
	}
	if req.Operation != admissionv1.Update {
		return allow(gate.Allowed)
	}
	path, ok := h.kinds.Path(req.Kind.Group, req.Kind.Kind)
	if !ok {
		return allow(gate.Warned, fmt.Sprintf("sunset: not judged: the gate knows no version field of %s.%s; add it to gate.kinds", req.Kind.Kind, req.Kind.Group))
	}
	to, found, err := versionAt(req.Object.Raw, path)
	switch {
	case err != nil:
		return allow(gate.Warned, fmt.Sprintf("sunset: not judged: %v", err))
	case !found:
		return allow(gate.Allowed)
	}
	from, found, err := versionAt(req.OldObject.Raw, path)
	if err != nil || !found {
		// Nothing to raise from: the version is being set, not changed.
		return allow(gate.Allowed)
	}
	meta, err := metadata(req.Object.Raw)
	if err != nil {
		return allow(gate.Warned, "sunset: not judged: the object's metadata is not JSON")
	}
	old, err := metadata(req.OldObject.Raw)
	if err != nil {
		return allow(gate.Warned, "sunset: not judged: the old object's metadata is not JSON")
	}
	meta.Namespace, meta.Name = req.Namespace, cmp.Or(meta.Name, req.Name)
	old.Namespace, old.Name = meta.Namespace, meta.Name
	// The cluster is the one the object stood for before the change, so
	// that one update cannot both raise the version and rename its
	// cluster to one Sunset has never heard. The override is the new
	// object's.
	meta.Labels = map[string]string{gate.ClusterLabel: h.gate.ClusterFor(old)}
	d, err := h.gate.Decide(gate.Request{Source: gate.SourceAdmission, Kind: req.Kind.Kind, Meta: meta, From: from, To: to, User: req.UserInfo.Username,
		DryRun: req.DryRun != nil && *req.DryRun})
	if err != nil {
		return nil, err
	}
	resp := &admissionv1.AdmissionResponse{Allowed: d.Allowed, Warnings: oneLine(d.Warnings)}
	if !d.Allowed {
		resp.Result = &metav1.Status{Status: metav1.StatusFailure, Code: http.StatusForbidden, Reason: metav1.StatusReasonForbidden, Message: d.Message}
	}
	return resp, nil
}

// versionAt reads the version at path of a raw object; found is false
// without an object or field.
func versionAt(raw []byte, path string) (kubeversion.Version, bool, error) {
	if len(raw) == 0 {
		return kubeversion.Version{}, false, nil
	}
	s, found, err := gate.VersionAt(raw, path)
	if err != nil || !found {
		return kubeversion.Version{}, false, err
	}
	v, err := kubeversion.Parse(s)
	if err != nil {
		return kubeversion.Version{}, false, fmt.Errorf("%s: %w", path, err)
	}
	return v, true, nil
}

// fail answers a review that could not be read, counted as an error.
func (h *Handler) fail(w http.ResponseWriter, code int, msg string) {
	h.gate.Failed(gate.SourceAdmission)
	h.log.Warn().Int("code", code).Str("error", msg).Msg("could not read an AdmissionReview")
	writeJSON(w, code, failedReview(code, msg))
}

// failedReview is an AdmissionReview that says what went wrong, for a
// caller that reads the body of an error.
func failedReview(code int, msg string) admissionv1.AdmissionReview {
	return admissionv1.AdmissionReview{TypeMeta: reviewType, Response: &admissionv1.AdmissionResponse{
		Result: &metav1.Status{Status: metav1.StatusFailure, Code: int32(code), Message: msg}}}
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

// metadata reads an object's metadata, and nothing else of it.
func metadata(raw []byte) (gate.Meta, error) {
	var obj struct {
		Metadata gate.Meta `json:"metadata"`
	}
	err := json.Unmarshal(raw, &obj)
	return obj.Metadata, err
}

// oneLine makes each warning text kube-apiserver passes on: it drops a
// warning holding a control character or invalid UTF-8 without a word
// (k8s.io/apimachinery/pkg/util/net.NewWarningHeader), and a refusal
// quoted in an override's warning has several lines.
func oneLine(warnings []string) []string {
	out := make([]string, 0, len(warnings))
	for _, w := range warnings {
		w = strings.ToValidUTF8(w, "?")
		w = strings.ReplaceAll(w, "\n", "; ")
		w = strings.Map(func(r rune) rune {
			if unicode.IsControl(r) {
				return ' '
			}
			return r
		}, w)
		out = append(out, w)
	}
	return out
}
