package api

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"cmp"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/kube-sunset/sunset/admission"
	sunsetv1 "github.com/kube-sunset/sunset/api/v1"
	"github.com/kube-sunset/sunset/catalog"
	"github.com/kube-sunset/sunset/countkey"
	"github.com/kube-sunset/sunset/internal/httpjson"
)

const webhooksPath = "/apis/" + sunsetv1.APIVersion + "/webhookcounts"

var webhookParams = []string{"class", "cluster", "since"}

// ParseWebhookQuery reads URL parameters, with every problem in one error.
// Kubernetes clients' paging parameters are accepted and ignored: the
// answer is always whole.
func ParseWebhookQuery(v url.Values, maxSince time.Duration) (sunsetv1.WebhookQuery, error) {
	q, err := ParseQuery(withoutKube(v, kubePagingParams), webhookParams, maxSince)
	problems := []string{}
	if err != nil {
		problems = append(problems, err.Error())
	}
	out := sunsetv1.WebhookQuery{Cluster: q.Cluster, Since: q.Since}
	if s := v.Get("class"); s != "" {
		c, err := admission.ParseClass(s)
		if err != nil {
			problems = append(problems, err.Error())
		}
		out.Class = c
	}
	if len(problems) > 0 {
		return out, errors.New(strings.Join(problems, "; "))
	}
	return out, nil
}

// WebhookQuerier reads admission webhook counts. *store.Store implements
// it.
type WebhookQuerier interface {
	ScanAdmission(from, to time.Time, fn func(countkey.AdmissionKey, countkey.AdmissionCounts) error) error
}

// WebhookService builds WebhookCount objects from admission webhook
// counts. The HTTP handler serves it; `sunset report webhooks --data-dir`
// calls it directly.
type WebhookService struct {
	q       WebhookQuerier
	classes *admission.Classes
	now     func() time.Time
}

// NewWebhookService builds a WebhookService; nil classes and now mean the
// default classes and time.Now.
func NewWebhookService(q WebhookQuerier, classes *admission.Classes, now func() time.Time) *WebhookService {
	if classes == nil {
		classes, _ = admission.NewClasses(admission.DefaultClasses())
	}
	if now == nil {
		now = time.Now
	}
	return &WebhookService{q: q, classes: classes, now: now}
}

type resourceID struct{ cluster, group, version, resource, subresource string }

// span accumulates counts over some hours, in total and per resource.
type span struct {
	total countkey.AdmissionCounts
	byRes map[resourceID]*countkey.AdmissionCounts
	seen  bool
}

func (s *span) add(r resourceID, c countkey.AdmissionCounts) {
	s.seen = true
	s.total.Add(c)
	if s.byRes == nil {
		s.byRes = map[resourceID]*countkey.AdmissionCounts{}
	}
	rc := s.byRes[r]
	if rc == nil {
		rc = &countkey.AdmissionCounts{}
		s.byRes[r] = rc
	}
	rc.Add(c)
}

// webhookAgg is everything read about one webhook name.
type webhookAgg struct {
	id     admission.WebhookID
	types  map[string]bool
	day    span
	hours  [hoursPerDay]span
	window span
}

// webhookReading is one read of the store, shaped for rendering.
type webhookReading struct {
	now, dayFrom, windowFrom time.Time
	webhooks                 map[string]*webhookAgg
	// resources are the totals rows over the window, else the day.
	resources span
	// certificates are the servers' certificate rows over the window, else
	// the day.
	certificates map[certificateID]*certificateAgg
}

type certificateID struct {
	cluster, host string
	problem       admission.CertificateProblem
}

type certificateAgg struct {
	requests uint64
	lastSeen time.Time
	byRes    map[resourceID]uint64
}

// certificateRow reports whether k holds a server's certificate problem
// (see package aggregate) rather than a webhook's counts.
func certificateRow(k countkey.AdmissionKey) (admission.CertificateRule, bool) {
	if k.Webhook != "" {
		return admission.CertificateRule{}, false
	}
	return admission.RuleOf(admission.CertificateProblem(k.Type))
}

func (s *WebhookService) read(q sunsetv1.WebhookQuery) (*webhookReading, error) {
	now := s.now().UTC().Truncate(time.Hour)
	rd := &webhookReading{now: now, dayFrom: now.Add(-(hoursPerDay - 1) * time.Hour), webhooks: map[string]*webhookAgg{},
		certificates: map[certificateID]*certificateAgg{}}
	from := rd.dayFrom
	if q.Since > 0 {
		rd.windowFrom = s.now().UTC().Add(-q.Since).Truncate(time.Hour)
		if rd.windowFrom.Before(from) {
			from = rd.windowFrom
		}
	}
	err := s.q.ScanAdmission(from, now, func(k countkey.AdmissionKey, c countkey.AdmissionCounts) error {
		if (q.Cluster != "" && k.Cluster != q.Cluster) || (q.Class != "" && !s.classes.In(q.Class, k.Resource, k.Subresource)) {
			return nil
		}
		r := resourceID{k.Cluster, k.Group, k.Version, k.Resource, k.Subresource}
		inDay := !k.Hour.Before(rd.dayFrom)
		inWindow := !rd.windowFrom.IsZero() && !k.Hour.Before(rd.windowFrom)
		if k.IsTotal() {
			if (rd.windowFrom.IsZero() && inDay) || inWindow {
				rd.resources.add(r, c)
			}
			return nil
		}
		if rule, ok := certificateRow(k); ok {
			if (rd.windowFrom.IsZero() && inDay) || inWindow {
				rd.addCertificate(certificateID{k.Cluster, k.Configuration, rule.Problem}, r, k.Hour, c.Requests)
			}
			return nil
		}
		id := admission.WebhookID{Configuration: k.Configuration, Webhook: k.Webhook}
		w := rd.webhooks[id.Name()]
		if w == nil {
			w = &webhookAgg{id: id, types: map[string]bool{}}
			rd.webhooks[id.Name()] = w
		}
		w.types[k.Type] = true
		if inDay {
			w.day.add(r, c)
			w.hours[k.Hour.Hour()].add(r, c)
		}
		if inWindow {
			w.window.add(r, c)
		}
		return nil
	})
	return rd, err
}

func (rd *webhookReading) addCertificate(id certificateID, r resourceID, hour time.Time, requests uint64) {
	agg := rd.certificates[id]
	if agg == nil {
		agg = &certificateAgg{byRes: map[resourceID]uint64{}}
		rd.certificates[id] = agg
	}
	agg.requests += requests
	agg.byRes[r] += requests
	if hour.After(agg.lastSeen) {
		agg.lastSeen = hour
	}
}

// renderCertificates lists the servers whose certificate was flagged, the
// soonest refused first, then by requests, cluster and host.
func (rd *webhookReading) renderCertificates() []sunsetv1.WebhookCertificate {
	out := make([]sunsetv1.WebhookCertificate, 0, len(rd.certificates))
	for id, agg := range rd.certificates {
		rule, _ := admission.RuleOf(id.problem)
		wc := sunsetv1.WebhookCertificate{Cluster: id.cluster, Host: id.host, Problem: string(id.problem), Reason: rule.Reason,
			RefusedByDefaultInRelease: rule.DefaultRefusedIn, GODEBUG: rule.GODEBUG, RefusedInRelease: rule.RefusedIn,
			RequestCount: int64(agg.requests), LastSeen: agg.lastSeen, ByResource: []sunsetv1.WebhookCertificateResource{}}
		for r, n := range agg.byRes {
			wc.ByResource = append(wc.ByResource, sunsetv1.WebhookCertificateResource{Name: countkey.APIName(r.group, r.version, r.resource),
				Subresource: r.subresource, RequestCount: int64(n)})
		}
		slices.SortFunc(wc.ByResource, func(a, b sunsetv1.WebhookCertificateResource) int {
			return cmp.Or(cmp.Compare(b.RequestCount, a.RequestCount), cmp.Compare(a.Name, b.Name), cmp.Compare(a.Subresource, b.Subresource))
		})
		out = append(out, wc)
	}
	slices.SortFunc(out, func(a, b sunsetv1.WebhookCertificate) int {
		ra, _ := catalog.ParseRelease(a.RefusedInRelease)
		rb, _ := catalog.ParseRelease(b.RefusedInRelease)
		return cmp.Or(cmp.Compare(ra.Major, rb.Major), cmp.Compare(ra.Minor, rb.Minor), cmp.Compare(b.RequestCount, a.RequestCount),
			cmp.Compare(a.Cluster, b.Cluster), cmp.Compare(a.Host, b.Host))
	})
	return out
}

// Webhooks lists every webhook seen in the last 24 hours (or the window),
// sorted by name.
func (s *WebhookService) Webhooks(q sunsetv1.WebhookQuery) (sunsetv1.WebhookCountList, error) {
	out := sunsetv1.WebhookCountList{TypeMeta: typeMeta("WebhookCountList"), Items: []sunsetv1.WebhookCount{}}
	rd, err := s.read(q)
	if err != nil {
		return out, err
	}
	for _, name := range slices.Sorted(maps.Keys(rd.webhooks)) {
		if w := rd.webhooks[name]; w.day.seen || w.window.seen {
			out.Items = append(out.Items, s.render(rd, w, q))
		}
	}
	_, out.Resources = s.renderSpan(&rd.resources)
	out.Certificates = rd.renderCertificates()
	return out, nil
}

// Webhook returns one webhook by name (configuration.webhook), or
// ErrNotFound when it was not seen in the last 24 hours (or the window).
func (s *WebhookService) Webhook(name string, q sunsetv1.WebhookQuery) (sunsetv1.WebhookCount, error) {
	rd, err := s.read(q)
	if err != nil {
		return sunsetv1.WebhookCount{}, err
	}
	w := rd.webhooks[name]
	if w == nil || (!w.day.seen && !w.window.seen) {
		return sunsetv1.WebhookCount{}, sunsetv1.ErrNotFound
	}
	return s.render(rd, w, q), nil
}

func (s *WebhookService) render(rd *webhookReading, w *webhookAgg, q sunsetv1.WebhookQuery) sunsetv1.WebhookCount {
	obj := sunsetv1.WebhookCount{TypeMeta: typeMeta("WebhookCount"), Metadata: metav1.ObjectMeta{Name: w.id.Name()},
		Spec: sunsetv1.WebhookCountSpec{Configuration: w.id.Configuration, Webhook: w.id.Webhook, Types: slices.Sorted(maps.Keys(w.types))}}
	st := &obj.Status
	st.WebhookCounts, st.ByResource = s.renderSpan(&w.day)
	st.Last24h = make([]sunsetv1.WebhookHour, hoursPerDay)
	for i := range w.hours {
		st.Last24h[i].WebhookCounts, st.Last24h[i].ByResource = s.renderSpan(&w.hours[i])
	}
	st.CurrentHour = st.Last24h[rd.now.Hour()]
	if q.Since > 0 {
		st.Window = &sunsetv1.WebhookWindow{Since: q.Since.String(), From: rd.windowFrom}
		st.Window.WebhookCounts, st.Window.ByResource = s.renderSpan(&w.window)
	}
	return obj
}

// renderSpan renders a span's totals and its resources, slowest first: by
// total webhook latency, then slow requests, then calls.
func (s *WebhookService) renderSpan(sp *span) (sunsetv1.WebhookCounts, []sunsetv1.WebhookResourceCount) {
	res := make([]sunsetv1.WebhookResourceCount, 0, len(sp.byRes))
	for r, c := range sp.byRes {
		rc := sunsetv1.WebhookResourceCount{Name: countkey.APIName(r.group, r.version, r.resource), Cluster: r.cluster,
			Group: r.group, Version: r.version, Resource: r.resource, Subresource: r.subresource, WebhookCounts: counts(*c)}
		for _, cl := range s.classes.Of(r.resource, r.subresource) {
			rc.Classes = append(rc.Classes, string(cl))
		}
		res = append(res, rc)
	}
	slices.SortFunc(res, func(a, b sunsetv1.WebhookResourceCount) int {
		return cmp.Or(cmp.Compare(b.WebhookLatencySeconds, a.WebhookLatencySeconds), cmp.Compare(b.SlowRequestCount, a.SlowRequestCount),
			cmp.Compare(b.CallCount, a.CallCount), cmp.Compare(b.RequestCount, a.RequestCount), cmp.Compare(a.Name, b.Name),
			cmp.Compare(a.Subresource, b.Subresource), cmp.Compare(a.Cluster, b.Cluster))
	})
	return counts(sp.total), res
}

func counts(c countkey.AdmissionCounts) sunsetv1.WebhookCounts {
	out := sunsetv1.WebhookCounts{RequestCount: int64(c.Requests), CallCount: int64(c.Calls), MutationCount: int64(c.Mutations),
		FailedOpenCount: int64(c.FailedOpen), SlowRequestCount: int64(c.Slow),
		WebhookLatencySeconds: time.Duration(c.LatencyNanos).Seconds(), LatencyBuckets: latencyBuckets(c.Buckets)}
	if c.Slow > 0 {
		out.MeanWebhookLatencySeconds = out.WebhookLatencySeconds / float64(c.Slow)
	}
	return out
}

// The store keeps one count per bucket of admission.LatencyBounds.
var _ [countkey.AdmissionBuckets]struct{} = [admission.LatencyBuckets]struct{}{}

func latencyBuckets(b [countkey.AdmissionBuckets]uint64) sunsetv1.LatencyBuckets {
	return sunsetv1.LatencyBuckets{UpTo500ms: int64(b[0]), UpTo1s: int64(b[1]), UpTo2s: int64(b[2]), UpTo5s: int64(b[3]), UpTo10s: int64(b[4]), Over10s: int64(b[5])}
}

// webhookHandler serves WebhookCounts over HTTP.
type webhookHandler struct {
	h   *Handler
	svc *WebhookService
}

func (wh webhookHandler) begin(w http.ResponseWriter, r *http.Request) (sunsetv1.WebhookQuery, bool) {
	if !wh.h.methodAllowed(w, r) {
		return sunsetv1.WebhookQuery{}, false
	}
	q, err := ParseWebhookQuery(r.URL.Query(), wh.h.maxSince)
	if err != nil {
		httpjson.Error(w, http.StatusBadRequest, httpjson.ReasonBadRequest, err.Error())
		return q, false
	}
	return q, true
}

func (wh webhookHandler) list(w http.ResponseWriter, r *http.Request) {
	q, ok := wh.begin(w, r)
	if !ok {
		return
	}
	out, err := wh.svc.Webhooks(q)
	if err != nil {
		wh.h.internalError(w, err)
		return
	}
	wh.h.write(w, r, out, webhookTable(out.Items))
}

func (wh webhookHandler) get(w http.ResponseWriter, r *http.Request) {
	q, ok := wh.begin(w, r)
	if !ok {
		return
	}
	name := r.PathValue("name")
	obj, err := wh.svc.Webhook(name, q)
	switch {
	case errors.Is(err, sunsetv1.ErrNotFound):
		httpjson.Error(w, http.StatusNotFound, httpjson.ReasonNotFound,
			fmt.Sprintf("webhookcounts %q not found: no audit annotation named that webhook in the last 24h or the window (names are configuration.webhook; GET %s lists them)", name, webhooksPath))
	case err != nil:
		wh.h.internalError(w, err)
	default:
		wh.h.write(w, r, obj, webhookTable([]sunsetv1.WebhookCount{obj}))
	}
}
