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
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"github.com/kube-sunset/sunset/aggregate"
	"github.com/kube-sunset/sunset/classify"
	"github.com/kube-sunset/sunset/countkey"
	"github.com/kube-sunset/sunset/ingest/auditjson"
	"github.com/kube-sunset/sunset/ingest/sink"
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

// Ingester is what the webhook commits to (the aggregator, or the
// fleet's forwarder) and asks for dry runs.
type Ingester interface {
	Ingest(ctx context.Context, origin classify.Origin, events []classify.Event) (classify.Summary, error)
	Plan(origin classify.Origin, events []classify.Event) ([]aggregate.Planned, error)
}

// Options configures New.
type Options struct {
	Ingester Ingester
	// Tallies counts the events and bodies that could not be decoded or
	// were set aside undecoded (required; the aggregator's, whatever
	// commits them).
	Tallies sink.Tallies
	Logger  zerolog.Logger
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
	KeepRequestObject func(*classify.Event) bool
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
	tallies        sink.Tallies
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
	keep           func(*classify.Event) bool
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
		opts.KeepRequestObject = func(*classify.Event) bool { return true }
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
		tallies:        opts.Tallies,
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

// Register adds the webhook routes to mux.
func (h *Handler) Register(mux *http.ServeMux) {
	mux.HandleFunc("/audit/webhook", h.serve)
	mux.HandleFunc("/audit/webhook/{node}", h.serve)
	mux.HandleFunc("/audit/webhook/{cluster}/{node}", h.serve)
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
			h.tallies.CountDecodeError(Source, string(de.Reason), 1)
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
		h.tallies.CountDecodeError(Source, string(reason), n)
	}
	for _, b := range bad.Samples[:min(len(bad.Samples), maxReportedItemErrors)] {
		resp.Errors = append(resp.Errors, ItemError{Index: b.Index, Reason: string(b.Err.Reason), Message: b.Err.Message})
	}
	if dryRun {
		return h.plan(w, origin, events, resp)
	}
	if bad.Count > 0 {
		h.tallies.CountInvalid(Source, bad.Count)
		h.log.Warn().Int("invalid", bad.Count).Int("events", len(events)+bad.Count).
			Str("cluster", origin.Cluster).Str("node", origin.Node).
			Str("first_reason", string(bad.Samples[0].Err.Reason)).Msg("batch has malformed events; counting the others")
	}
	h.tallies.CountPrefiltered(Source, skipped)
	if skipped != (classify.Prefiltered{}) {
		h.tallies.HeardReads(origin.Cluster, skipped.Reads > 0)
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
		fmt.Sprintf("dryRun %q is not valid; the only valid value is All", countkey.Truncate(strings.Join(v, ","), 32)))
}

// plan answers a dry run: every event classified, duplicates checked against
// the store, nothing stored.
func (h *Handler) plan(w http.ResponseWriter, origin classify.Origin, events []classify.Event, resp Response) error {
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

// origin works out cluster and node from the path, else the credential (a
// bound token, a client certificate's common name), else the peer address.
// A credential of another apiserver is refused with 403, and logged.
func (h *Handler) origin(r *http.Request, cred credential) (classify.Origin, error) {
	o := classify.Origin{Source: Source, Cluster: r.PathValue("cluster"), Node: r.PathValue("node")}
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

// requestContext honours the ?timeout= that kube-apiserver adds to every
// webhook call: past it, the apiserver has given up and will retry anyway.
func requestContext(r *http.Request) (context.Context, context.CancelFunc) {
	if d, err := time.ParseDuration(r.URL.Query().Get("timeout")); err == nil && d > 0 {
		return context.WithTimeout(r.Context(), d)
	}
	return context.WithCancel(r.Context())
}
