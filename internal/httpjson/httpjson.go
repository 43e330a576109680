// Package httpjson writes JSON responses and the one error envelope every
// Sunset endpoint uses.
//
// Errors are metav1.Status objects built with k8s.io/apimachinery's
// api/errors, so kubectl and client-go render them the way administrators
// already know:
//
//	{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"...","reason":"BadRequest","code":400}
package httpjson

import (
	"encoding/json"
	"net/http"
	"strconv"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
)

// Codecs encode the metav1 objects Sunset answers with besides its own:
// discovery documents, Tables and Status errors. k8s.io/apiserver's
// handlers and filters take them.
var Codecs = newCodecs()

func newCodecs() serializer.CodecFactory {
	scheme := runtime.NewScheme()
	metav1.AddToGroupVersion(scheme, schema.GroupVersion{Version: "v1"})
	utilruntime.Must(metav1.AddMetaToScheme(scheme))
	return serializer.NewCodecFactory(scheme)
}

// Reason is the machine-readable type of an error.
type Reason = metav1.StatusReason

// Reasons used by Sunset, with the HTTP code each one goes with.
const (
	ReasonBadRequest           = metav1.StatusReasonBadRequest            // 400
	ReasonUnauthorized         = metav1.StatusReasonUnauthorized          // 401
	ReasonForbidden            = metav1.StatusReasonForbidden             // 403
	ReasonNotFound             = metav1.StatusReasonNotFound              // 404
	ReasonMethodNotAllowed     = metav1.StatusReasonMethodNotAllowed      // 405
	ReasonRequestEntityTooLong = metav1.StatusReasonRequestEntityTooLarge // 413
	ReasonUnsupportedMedia     = metav1.StatusReasonUnsupportedMediaType  // 415
	ReasonTooManyRequests      = metav1.StatusReasonTooManyRequests       // 429
	ReasonInternalError        = metav1.StatusReasonInternalError         // 500
	ReasonServiceUnavailable   = metav1.StatusReasonServiceUnavailable    // 503
)

// Write writes v as indented JSON with the given code.
func Write(w http.ResponseWriter, code int, v any) {
	write(w, code, v, true)
}

// WriteFor writes v as JSON with the given code, indented only for a
// reader: when the request says ?pretty=true, or, without ?pretty, comes
// from curl or Wget, as kube-apiserver decides (which also counts
// browsers: Sunset's own page reads the API with fetch). Programs get it
// compact, as from kube-apiserver: the indentation of a day of nodes and
// users is more than half the bytes.
func WriteFor(w http.ResponseWriter, r *http.Request, code int, v any) {
	write(w, code, v, Pretty(r))
}

// Pretty reports whether r asks for indented JSON (see WriteFor).
func Pretty(r *http.Request) bool {
	if r.URL != nil && strings.Contains(r.URL.RawQuery, "pretty") {
		if p := r.URL.Query().Get("pretty"); p != "" {
			b, _ := strconv.ParseBool(p)
			return b
		}
	}
	ua := r.UserAgent()
	return strings.HasPrefix(ua, "curl") || strings.HasPrefix(ua, "Wget")
}

func write(w http.ResponseWriter, code int, v any, indent bool) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(code)
	enc := json.NewEncoder(w)
	if indent {
		enc.SetIndent("", "  ")
	}
	_ = enc.Encode(v)
}

// Error writes a Failure Status with the given code, reason and message.
func Error(w http.ResponseWriter, code int, reason Reason, message string) {
	WriteStatus(w, &apierrors.StatusError{ErrStatus: metav1.Status{
		Status: metav1.StatusFailure, Reason: reason, Message: message, Code: int32(code),
	}})
}

// WriteStatus writes an error from k8s.io/apimachinery/pkg/api/errors (or
// any APIStatus) as its Status object, with its code.
func WriteStatus(w http.ResponseWriter, err apierrors.APIStatus) {
	st := err.Status()
	st.TypeMeta = metav1.TypeMeta{Kind: "Status", APIVersion: "v1"}
	Write(w, int(st.Code), st)
}

// WriteEncoded answers with JSON already encoded compactly, in pieces
// written one after the other, ended by a newline as WriteFor ends it.
func WriteEncoded(w http.ResponseWriter, code int, pieces [][]byte) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(code)
	for _, p := range pieces {
		if _, err := w.Write(p); err != nil {
			return
		}
	}
	_, _ = w.Write([]byte{'\n'})
}
