package webhook

import (
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kube-sunset/sunset/countkey"
	"github.com/kube-sunset/sunset/internal/httpjson"
)

func checkContentType(ct string) error {
	var msg string
	if ct == "" {
		msg = "Content-Type is missing; send application/json (curl: -H 'Content-Type: application/json')"
	} else if mt, _, err := mime.ParseMediaType(ct); err != nil || mt != "application/json" {
		msg = fmt.Sprintf("Content-Type %q is not supported; send application/json (curl: -H 'Content-Type: application/json')", countkey.Truncate(ct, 64))
	} else {
		return nil
	}
	return fail(http.StatusUnsupportedMediaType, httpjson.ReasonUnsupportedMedia, msg)
}

// errTooLarge is returned by the body reader past max-body-bytes.
var errTooLarge = errors.New("body too large")

// openBody returns the body to decode, decompressed and limited to
// max-body-bytes.
func (h *Handler) openBody(w http.ResponseWriter, r *http.Request, raw io.Reader) (io.Reader, error) {
	var src io.Reader = http.MaxBytesReader(w, io.NopCloser(raw), h.maxBody)
	switch enc := r.Header.Get("Content-Encoding"); enc {
	case "", "identity":
	case "gzip":
		zr, err := gzip.NewReader(src)
		if err != nil {
			return nil, fail(http.StatusBadRequest, httpjson.ReasonBadRequest, "body is not valid gzip")
		}
		// The decompressed size is what costs memory, so limit that too.
		src = &limitedReader{r: zr, left: h.maxBody}
	default:
		return nil, fail(http.StatusUnsupportedMediaType, httpjson.ReasonUnsupportedMedia,
			fmt.Sprintf("Content-Encoding %q is not supported; send identity or gzip", countkey.Truncate(enc, 32)))
	}
	return src, nil
}

// tooLarge refuses a body over max-body-bytes.
func (h *Handler) tooLarge() error {
	return fail(http.StatusRequestEntityTooLarge, httpjson.ReasonRequestEntityTooLong,
		fmt.Sprintf("body is larger than the limit of %d bytes; raise max-body-bytes if your events are this large", h.maxBody))
}

// readFailed is the answer to an error reading the body.
func (h *Handler) readFailed(err error) error {
	var mbe *http.MaxBytesError
	switch {
	case errors.As(err, &mbe) || errors.Is(err, errTooLarge):
		return h.tooLarge()
	case errors.Is(err, errBodyTooSlow):
		h.metrics.tooSlow.Inc()
		return fail(http.StatusRequestTimeout, metav1.StatusReasonTimeout,
			fmt.Sprintf("the body did not start within %s of the headers, or came slower than %d bytes per second after %s of slack; send it again",
				h.bodyStart, h.minRate, h.slack))
	}
	return fail(http.StatusBadRequest, httpjson.ReasonBadRequest, "reading body: "+err.Error())
}

// limitedReader fails with errTooLarge once more than left bytes are read.
type limitedReader struct {
	r    io.Reader
	left int64
}

func (l *limitedReader) Read(p []byte) (int, error) {
	if l.left < 0 {
		return 0, errTooLarge
	}
	if int64(len(p)) > l.left+1 {
		p = p[:l.left+1]
	}
	n, err := l.r.Read(p)
	l.left -= int64(n)
	if l.left < 0 {
		return n, errTooLarge
	}
	return n, err
}
