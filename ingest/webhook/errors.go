package webhook

import (
	"errors"
	"net/http"

	"github.com/kube-sunset/sunset/aggregate"
	"github.com/kube-sunset/sunset/classify"
	"github.com/kube-sunset/sunset/countkey"
	"github.com/kube-sunset/sunset/internal/httpjson"
)

// ingestFailed is the answer to a batch the aggregator did not commit.
func (h *Handler) ingestFailed(origin classify.Origin, err error) error {
	switch {
	case errors.Is(err, aggregate.ErrStopped):
		return errShuttingDown
	case errors.Is(err, countkey.ErrNoSpace):
		// Nothing was written; the apiserver retries the batch.
		return fail(http.StatusServiceUnavailable, httpjson.ReasonServiceUnavailable,
			"sunset's data directory is short of disk space; nothing of the batch was stored, retry later").with("Retry-After", "10")
	}
	h.log.Error().Err(err).Str("cluster", origin.Cluster).Str("node", origin.Node).Msg("batch not committed")
	return fail(http.StatusInternalServerError, httpjson.ReasonInternalError, "the batch could not be stored; the sender should retry: "+err.Error())
}

// statusError is why a request is refused: the status it is answered
// with, and the header that tells the sender what to do (Retry-After,
// Allow, WWW-Authenticate), if any.
type statusError struct {
	code    int
	reason  httpjson.Reason
	message string
	header  [2]string
}

func (e *statusError) Error() string { return e.message }

// fail is a refusal with the given status.
func fail(code int, reason httpjson.Reason, message string) *statusError {
	return &statusError{code: code, reason: reason, message: message}
}

// with adds the header name: value to the answer.
func (e *statusError) with(name, value string) *statusError {
	e.header = [2]string{name, value}
	return e
}

// errShuttingDown answers a batch that arrives while Sunset stops.
var errShuttingDown = fail(http.StatusServiceUnavailable, httpjson.ReasonServiceUnavailable, "sunset is shutting down; retry later").
	with("Retry-After", "10")

// writeError answers err, a *statusError; anything else is a 500, which
// handle never returns on purpose.
func (h *Handler) writeError(w http.ResponseWriter, err error) {
	var se *statusError
	if !errors.As(err, &se) {
		se = fail(http.StatusInternalServerError, httpjson.ReasonInternalError, err.Error())
	}
	if se.header[0] != "" {
		w.Header().Set(se.header[0], se.header[1])
	}
	httpjson.Error(w, se.code, se.reason, se.message)
}
