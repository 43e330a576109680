// Package webhook receives kube-apiserver's audit webhook.
//
// kube-apiserver POSTs audit.k8s.io/v1 EventLists (batch mode) or single
// events to a URL from its --audit-webhook-config-file. It drops the URL's
// query string, so the apiserver's identity comes from the path:
//
//	POST /audit/webhook                    node = the sender's address
//	POST /audit/webhook/{node}             cluster = the default cluster
//	POST /audit/webhook/{cluster}/{node}
//
// A 2xx answer means every counted request of the body is on disk. Any other
// answer makes the apiserver re-send the identical body, which is safe because
// requests are deduplicated by auditID.
package webhook

import (
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"mime"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kube-sunset/sunset/aggregate"
	"github.com/kube-sunset/sunset/ingest/auditjson"
	"github.com/kube-sunset/sunset/internal/httpjson"
)

// Source is the value of the source label for events from the webhook.
const Source = "webhook"

// DefaultMaxBodyBytes fits kube-apiserver's largest batch, 400 events, even
// when each event is 100 KiB (RequestResponse level), with room for framing.
const DefaultMaxBodyBytes = 64 << 20

// DefaultMaxInFlight bounds concurrent batches; beyond it senders get a 429.
const DefaultMaxInFlight = 16

// DefaultDecodeBudget is the memory the batches being decoded at once may
// hold between them (auditjson.Budget): their buffers, the request objects
// kept for field rules and the decoded events. A batch that would pass it
// gets 429, like one over max-inflight-batches.
const DefaultDecodeBudget = 128 << 20

// maxNameBytes bounds cluster and node names taken from the path, like a
// Kubernetes object name.
const maxNameBytes = 253

// maxReportedItemErrors bounds how many malformed items a response lists:
// as many as the decoder keeps.
const maxReportedItemErrors = auditjson.MaxSamples

// Ingester is what the webhook needs from the aggregator.
type Ingester interface {
	Ingest(ctx context.Context, origin aggregate.Origin, events []aggregate.Event) (aggregate.Summary, error)
	Plan(origin aggregate.Origin, events []aggregate.Event) ([]aggregate.Planned, error)
	CountInvalid(source string, n int)
	CountDecodeError(source, reason string, n int)
	CountPrefiltered(source string, p aggregate.Prefiltered)
	// HeardReads notes that a cluster sent events that were set aside,
	// reads among them or not.
	HeardReads(cluster string, read bool)
}

// Options configures New.
type Options struct {
	Ingester Ingester
	Logger   zerolog.Logger
	// Registerer receives the webhook's metrics; nil means none.
	Registerer prometheus.Registerer
	// DefaultCluster names the cluster when the path has none.
	DefaultCluster string
	// MaxBodyBytes is the largest accepted body, after decompression.
	// Zero means DefaultMaxBodyBytes.
	MaxBodyBytes int64
	// MaxInFlight is how many batches are handled at once. Zero means
	// DefaultMaxInFlight.
	MaxInFlight int
	// DecodeBudget is what the batches being decoded at once may hold
	// between them. Zero means DefaultDecodeBudget.
	DecodeBudget int64
	// MaxInFlightPerCredential is how many of those one credential may
	// hold at once (see pace.go); past it, its batches get 429 while
	// others still get slots. Zero means half of MaxInFlight (at least 1).
	MaxInFlightPerCredential int
	// Token, if set, may be sent as "Authorization: Bearer <token>" by any
	// apiserver.
	Token string
	// Tokens, if set, are bearer tokens each bound to one apiserver: a
	// token may post only as its own cluster and node (403 otherwise).
	// With Token too, either is accepted.
	Tokens Tokens
	// RequireClientCert demands a client certificate verified by the
	// server's client CA. Its common name names the node when the path
	// does not; a node in the path must be its common name or one of its
	// subject alternative names, and a cluster in the path one of its
	// organizations (403 otherwise).
	RequireClientCert bool
	// KeepRequestObject says which events' request objects the ingester
	// reads (field rules); the others are dropped as they are decoded, so
	// that a batch of large objects is never held whole. Nil keeps all.
	KeepRequestObject func(*aggregate.Event) bool
	// Prefilter sets aside, undecoded, the events of a batch that cannot
	// count; nil decodes every event.
	Prefilter *auditjson.Prefilter
	// MinBodyBytesPerSecond is the slowest average rate a body may come
	// at once it has started (see pace.go); slower ones get 408. Zero
	// means DefaultMinBodyBytesPerSecond, negative no minimum.
	MinBodyBytesPerSecond int64
	// BodyStartTimeout bounds the wait for a body's first byte, and
	// BodySlack how far behind the minimum rate a body may fall. Zero
	// means DefaultBodyStartTimeout and DefaultBodySlack.
	BodyStartTimeout, BodySlack time.Duration
}

// Handler serves the webhook endpoints.
type Handler struct {
	ingester       Ingester
	token          []byte
	tokens         Tokens
	requireCert    bool
	log            zerolog.Logger
	defaultCluster string
	maxBody        int64
	slots          chan struct{}
	budget         *auditjson.Budget
	shares         *shares
	metrics        *metrics
	keep           func(*aggregate.Event) bool
	prefilter      *auditjson.Prefilter
	minRate        int64
	bodyStart      time.Duration
	slack          time.Duration
	// onBodyWait, onSlot: test hooks, called when a batch starts waiting
	// for its body and when it has taken a slot.
	onBodyWait, onSlot func()

	// drainMu orders Drain against batches taking a slot: once draining is
	// set no batch starts, and inFlight counts those that did.
	drainMu  sync.Mutex
	draining bool
	inFlight sync.WaitGroup
}

// New builds a Handler.
func New(opts Options) *Handler {
	if opts.MaxBodyBytes <= 0 {
		opts.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if opts.MaxInFlight <= 0 {
		opts.MaxInFlight = DefaultMaxInFlight
	}
	if opts.DefaultCluster == "" {
		opts.DefaultCluster = "default"
	}
	if opts.DecodeBudget <= 0 {
		opts.DecodeBudget = DefaultDecodeBudget
	}
	if opts.KeepRequestObject == nil {
		opts.KeepRequestObject = func(*aggregate.Event) bool { return true }
	}
	if opts.MinBodyBytesPerSecond == 0 {
		opts.MinBodyBytesPerSecond = DefaultMinBodyBytesPerSecond
	}
	if opts.BodyStartTimeout <= 0 {
		opts.BodyStartTimeout = DefaultBodyStartTimeout
	}
	if opts.BodySlack <= 0 {
		opts.BodySlack = DefaultBodySlack
	}
	return &Handler{
		ingester:       opts.Ingester,
		log:            opts.Logger.With().Str("component", "webhook").Logger(),
		defaultCluster: opts.DefaultCluster,
		maxBody:        opts.MaxBodyBytes,
		slots:          make(chan struct{}, opts.MaxInFlight),
		budget:         auditjson.NewBudget(opts.DecodeBudget),
		shares:         newShares(opts.MaxInFlightPerCredential, opts.MaxInFlight),
		token:          []byte(opts.Token),
		tokens:         opts.Tokens,
		requireCert:    opts.RequireClientCert,
		metrics:        newMetrics(opts.Registerer),
		keep:           opts.KeepRequestObject,
		prefilter:      opts.Prefilter,
		minRate:        opts.MinBodyBytesPerSecond,
		bodyStart:      opts.BodyStartTimeout,
		slack:          opts.BodySlack,
	}
}

// Drain makes every new batch get 503 with Retry-After, so that its sender
// retries it later. Shutdown calls it while the server still answers
// /-/ready, then Wait.
func (h *Handler) Drain() {
	h.drainMu.Lock()
	defer h.drainMu.Unlock()
	h.draining = true
}

// Wait returns once the batches admitted before Drain are answered, or
// when ctx is done.
func (h *Handler) Wait(ctx context.Context) error {
	done := make(chan struct{})
	go func() {
		h.inFlight.Wait()
		close(done)
	}()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// start admits a batch unless draining; finish must follow.
func (h *Handler) start() bool {
	h.drainMu.Lock()
	defer h.drainMu.Unlock()
	if h.draining {
		return false
	}
	h.inFlight.Add(1)
	return true
}

// Register adds the webhook routes to mux.
func (h *Handler) Register(mux *http.ServeMux) {
	mux.HandleFunc("/audit/webhook", h.serve)
	mux.HandleFunc("/audit/webhook/{node}", h.serve)
	mux.HandleFunc("/audit/webhook/{cluster}/{node}", h.serve)
}

// Response is the body of a 200 answer. kube-apiserver ignores it; it is
// there for people testing their setup with curl.
type Response struct {
	Cluster string `json:"cluster"`
	Node    string `json:"node"`
	aggregate.Summary
	Invalid int `json:"invalid"`
	// Errors lists the first malformed items, by index in the list.
	Errors []ItemError `json:"errors,omitempty"`
}

// DryRunResponse is the body of a 200 answer to ?dryRun=All: what each
// event would have become. Nothing was stored.
type DryRunResponse struct {
	Response
	DryRun bool           `json:"dryRun"`
	Events []PlannedEvent `json:"events"`
}

// PlannedEvent is what one well-formed event would have become.
type PlannedEvent struct {
	AuditID string `json:"auditID"`
	// Result is counted, duplicate, or why it is skipped: skipped_stage,
	// not_deprecated, no_object_ref, expired, future.
	Result         string `json:"result"`
	API            string `json:"api,omitempty"`
	Subresource    string `json:"subresource,omitempty"`
	Hour           string `json:"hour,omitempty"`
	Node           string `json:"node,omitempty"`
	Username       string `json:"username,omitempty"`
	UserAgent      string `json:"userAgent,omitempty"`
	Verb           string `json:"verb,omitempty"`
	RemovedRelease string `json:"removedRelease,omitempty"`
	// AlreadyRemoved marks a request to an API that was already removed.
	AlreadyRemoved bool `json:"alreadyRemoved,omitempty"`
	// Admission is what the admission webhook counter would do: counted
	// or duplicate; empty when the event has no webhook annotations.
	Admission string `json:"admission,omitempty"`
}

// ItemError describes one malformed item without quoting it.
type ItemError struct {
	Index   int    `json:"index"`
	Reason  string `json:"reason"`
	Message string `json:"message"`
}

func (h *Handler) serve(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	rec := &statusRecorder{ResponseWriter: w}
	if err := h.handle(rec, r); err != nil {
		h.writeError(rec, err)
	}
	h.metrics.observe(rec.code, time.Since(start))
}

// handle answers a batch with 200, or returns the error to answer with.
func (h *Handler) handle(w http.ResponseWriter, r *http.Request) error {
	if r.Method != http.MethodPost {
		return fail(http.StatusMethodNotAllowed, httpjson.ReasonMethodNotAllowed, "the audit webhook accepts only POST").
			with("Allow", http.MethodPost)
	}
	cred, msg := h.authenticate(r)
	if msg != "" {
		return fail(http.StatusUnauthorized, httpjson.ReasonUnauthorized, msg).with("WWW-Authenticate", `Bearer realm="sunset"`)
	}
	dryRun, err := dryRunParam(r)
	if err != nil {
		return err
	}
	origin, err := h.origin(r, cred)
	if err != nil {
		return err
	}
	if err := checkContentType(r.Header.Get("Content-Type")); err != nil {
		return err
	}
	if r.ContentLength > h.maxBody {
		return h.tooLarge()
	}
	// No slot is held while the body has not started (pace.go).
	raw, err := h.awaitBody(w, r)
	if err != nil {
		return h.readFailed(err)
	}
	release, err := h.takeSlot(cred.share(origin))
	if err != nil {
		return err
	}
	defer release()
	if !h.start() {
		return errShuttingDown
	}
	defer h.inFlight.Done()
	body, err := h.openBody(w, r, h.pace(w, raw))
	if err != nil {
		return err
	}
	keep, prefilter := h.keep, h.prefilter
	if dryRun {
		// A dry run never reads request objects, and tells what became
		// of every event.
		keep, prefilter = nil, nil
	}
	// What the batch holds is given back once it is answered.
	acct := h.budget.Open()
	defer acct.Close()
	events, bad, skipped, err := auditjson.DecodeStreamWithin(acct, body, keep, prefilter)
	if err != nil {
		var de *auditjson.Error
		switch {
		case errors.As(err, &de):
			h.ingester.CountDecodeError(Source, string(de.Reason), 1)
			return fail(http.StatusBadRequest, httpjson.ReasonBadRequest, de.Message)
		case errors.Is(err, auditjson.ErrOverBudget):
			h.metrics.overloaded.Inc()
			return fail(http.StatusTooManyRequests, httpjson.ReasonTooManyRequests,
				fmt.Sprintf("the batches being decoded hold the decode budget of %d bytes; retry later", h.budget.Total())).with("Retry-After", "1")
		case errors.Is(err, auditjson.ErrBodyOverBudget):
			return fail(http.StatusRequestEntityTooLarge, httpjson.ReasonRequestEntityTooLong,
				fmt.Sprintf("decoding the body takes more than the whole decode budget of %d bytes; send smaller batches", h.budget.Total()))
		}
		return h.readFailed(err)
	}
	// Malformed items are counted by reason; only the first few are
	// described (auditjson keeps no more).
	resp := Response{Cluster: origin.Cluster, Node: origin.Node, Invalid: bad.Count}
	for reason, n := range bad.ByReason {
		h.ingester.CountDecodeError(Source, string(reason), n)
	}
	for _, b := range bad.Samples[:min(len(bad.Samples), maxReportedItemErrors)] {
		resp.Errors = append(resp.Errors, ItemError{Index: b.Index, Reason: string(b.Err.Reason), Message: b.Err.Message})
	}
	if dryRun {
		return h.plan(w, origin, events, resp)
	}
	if bad.Count > 0 {
		h.ingester.CountInvalid(Source, bad.Count)
		h.log.Warn().Int("invalid", bad.Count).Int("events", len(events)+bad.Count).
			Str("cluster", origin.Cluster).Str("node", origin.Node).
			Str("first_reason", string(bad.Samples[0].Err.Reason)).Msg("batch has malformed events; counting the others")
	}
	h.ingester.CountPrefiltered(Source, skipped)
	if skipped != (aggregate.Prefiltered{}) {
		h.ingester.HeardReads(origin.Cluster, skipped.Reads > 0)
	}
	ctx, cancel := requestContext(r)
	defer cancel()
	sum, err := h.ingester.Ingest(ctx, origin, events)
	if err != nil {
		return h.ingestFailed(origin, err)
	}
	sum.AddPrefiltered(skipped)
	resp.Summary = sum
	httpjson.Write(w, http.StatusOK, resp)
	return nil
}

// ingestFailed is the answer to a batch the aggregator did not commit.
func (h *Handler) ingestFailed(origin aggregate.Origin, err error) error {
	switch {
	case errors.Is(err, aggregate.ErrStopped):
		return errShuttingDown
	case errors.Is(err, aggregate.ErrNoSpace):
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

// dryRunParam reads ?dryRun= with the Kubernetes semantics: All, or absent.
func dryRunParam(r *http.Request) (bool, error) {
	v, ok := r.URL.Query()["dryRun"]
	if !ok {
		return false, nil
	}
	if len(v) == 1 && v[0] == "All" {
		return true, nil
	}
	return false, fail(http.StatusBadRequest, httpjson.ReasonBadRequest,
		fmt.Sprintf("dryRun %q is not valid; the only valid value is All", aggregate.Truncate(strings.Join(v, ","), 32)))
}

// plan answers a dry run: every event classified, duplicates checked against
// the store, nothing stored.
func (h *Handler) plan(w http.ResponseWriter, origin aggregate.Origin, events []aggregate.Event, resp Response) error {
	planned, err := h.ingester.Plan(origin, events)
	if err != nil {
		return fail(http.StatusInternalServerError, httpjson.ReasonInternalError, "planning the batch: "+err.Error())
	}
	out := DryRunResponse{Response: resp, DryRun: true, Events: make([]PlannedEvent, len(planned))}
	for i, p := range planned {
		out.Tally(p.Result)
		out.TallyAdmission(p.Admission)
		out.Events[i] = NewPlannedEvent(p)
	}
	httpjson.Write(w, http.StatusOK, out)
	return nil
}

// NewPlannedEvent describes what planning decided for one event.
func NewPlannedEvent(p aggregate.Planned) PlannedEvent {
	pe := PlannedEvent{AuditID: p.ID, Result: string(p.Result), Admission: string(p.Admission)}
	if p.Result == aggregate.ResultCounted {
		k := p.Key
		pe.API, pe.Subresource, pe.Hour, pe.Node = k.API, k.Subresource, k.Hour.Format(time.RFC3339), k.Node
		pe.Username, pe.UserAgent, pe.Verb = k.Username, k.UserAgent, k.Verb
		pe.RemovedRelease, pe.AlreadyRemoved = p.RemovedRelease, k.Removed
	}
	return pe
}

// origin works out cluster and node from the path, else the credential (a
// bound token, a client certificate's common name), else the peer address.
// A credential of another apiserver is refused with 403, and logged.
func (h *Handler) origin(r *http.Request, cred credential) (aggregate.Origin, error) {
	o := aggregate.Origin{Source: Source, Cluster: r.PathValue("cluster"), Node: r.PathValue("node")}
	pathNode, pathCluster := o.Node != "", o.Cluster != ""
	if o.Cluster == "" {
		o.Cluster = h.defaultCluster
	}
	var denied string
	if o.Cluster, o.Node, denied = cred.authorize(o.Cluster, o.Node, pathNode, pathCluster); denied != "" {
		h.metrics.forbidden.Inc()
		h.log.Warn().Str("cluster", o.Cluster).Str("node", o.Node).Str("remote", r.RemoteAddr).
			Msg("webhook credentials of another apiserver; answered 403")
		return o, fail(http.StatusForbidden, httpjson.ReasonForbidden, denied)
	}
	if o.Node == "" {
		host, _, err := net.SplitHostPort(r.RemoteAddr)
		if err != nil {
			host = r.RemoteAddr
		}
		o.Node = host
	}
	for _, f := range []struct{ name, v string }{{"cluster", o.Cluster}, {"node", o.Node}} {
		if len(f.v) > maxNameBytes {
			return o, fail(http.StatusBadRequest, httpjson.ReasonBadRequest,
				fmt.Sprintf("the %s name in the path is %d bytes; the limit is %d", f.name, len(f.v), maxNameBytes))
		}
	}
	return o, nil
}

func checkContentType(ct string) error {
	var msg string
	if ct == "" {
		msg = "Content-Type is missing; send application/json (curl: -H 'Content-Type: application/json')"
	} else if mt, _, err := mime.ParseMediaType(ct); err != nil || mt != "application/json" {
		msg = fmt.Sprintf("Content-Type %q is not supported; send application/json (curl: -H 'Content-Type: application/json')", aggregate.Truncate(ct, 64))
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
			fmt.Sprintf("Content-Encoding %q is not supported; send identity or gzip", aggregate.Truncate(enc, 32)))
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

// requestContext honours the ?timeout= that kube-apiserver adds to every
// webhook call: past it, the apiserver has given up and will retry anyway.
func requestContext(r *http.Request) (context.Context, context.CancelFunc) {
	if d, err := time.ParseDuration(r.URL.Query().Get("timeout")); err == nil && d > 0 {
		return context.WithTimeout(r.Context(), d)
	}
	return context.WithCancel(r.Context())
}

type statusRecorder struct {
	http.ResponseWriter
	code int
}

func (s *statusRecorder) WriteHeader(code int) {
	if s.code == 0 {
		s.code = code
	}
	s.ResponseWriter.WriteHeader(code)
}

// Unwrap lets http.ResponseController reach the connection, for read
// deadlines.
func (s *statusRecorder) Unwrap() http.ResponseWriter { return s.ResponseWriter }

func (s *statusRecorder) Write(b []byte) (int, error) {
	if s.code == 0 {
		s.code = http.StatusOK
	}
	return s.ResponseWriter.Write(b)
}

func codeLabel(code int) string {
	if code == 0 {
		code = http.StatusOK
	}
	return strconv.Itoa(code)
}
