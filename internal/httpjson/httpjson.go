// Package httpjson writes JSON responses and the one error envelope every
// Sunset endpoint uses.
//
// Errors are Kubernetes Status objects, so kubectl and client-go render them
// the way administrators already know:
//
//	{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"BadRequest","message":"...","code":400}
package httpjson

import (
	"encoding/json"
	"net/http"
)

// Reason is the machine-readable type of an error, as in metav1.StatusReason.
type Reason string

// Reasons used by Sunset, with the HTTP code each one goes with.
const (
	ReasonBadRequest           Reason = "BadRequest"            // 400
	ReasonUnauthorized         Reason = "Unauthorized"          // 401
	ReasonForbidden            Reason = "Forbidden"             // 403
	ReasonNotFound             Reason = "NotFound"              // 404
	ReasonMethodNotAllowed     Reason = "MethodNotAllowed"      // 405
	ReasonRequestEntityTooLong Reason = "RequestEntityTooLarge" // 413
	ReasonUnsupportedMedia     Reason = "UnsupportedMediaType"  // 415
	ReasonTooManyRequests      Reason = "TooManyRequests"       // 429
	ReasonInternalError        Reason = "InternalError"         // 500
	ReasonServiceUnavailable   Reason = "ServiceUnavailable"    // 503
)

// Status is the error envelope.
type Status struct {
	Kind       string `json:"kind"`
	APIVersion string `json:"apiVersion"`
	Status     string `json:"status"`
	Reason     Reason `json:"reason"`
	Message    string `json:"message"`
	Code       int    `json:"code"`
}

// Write writes v as JSON with the given code.
func Write(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(code)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}

// Error writes the error envelope.
func Error(w http.ResponseWriter, code int, reason Reason, message string) {
	Write(w, code, Status{Kind: "Status", APIVersion: "v1", Status: "Failure", Reason: reason, Message: message, Code: code})
}
