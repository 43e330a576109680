// Package admission reads what kube-apiserver's audit annotations say about
// admission webhooks: which webhook was called on a request, whether it
// mutated the object or failed open, and how long the request spent in
// webhooks. It also sorts resources into the classes an administrator
// cares about (critical, security-sensitive, virtual) and bounds the metric
// label values derived from both.
//
// The annotations, as kube-apiserver v1.36 writes them on the
// ResponseComplete (or Panic) event, at Metadata level and above:
//
//	mutation.webhook.admission.k8s.io/round_R_index_I             {"configuration":..,"webhook":..,"mutated":bool}, every mutating call
//	failed-open.mutation.webhook.admission.k8s.io/round_R_index_I  the webhook's name, a mutating call that failed and was ignored
//	failed-open.validating.webhook.admission.k8s.io/round_0_index_I the webhook's name, a validating call that failed and was ignored
//	apiserver.latency.k8s.io/mutating-webhook                      Go duration, all mutating calls of the request
//	apiserver.latency.k8s.io/validating-webhook                    Go duration, all validating calls of the request
//	insecure-sha1.invalid-cert.kubernetes.io/<host>                a webhook server's certificate has a SHA-1 signature
//	missing-san.invalid-cert.kubernetes.io/<host>                  a webhook server's certificate has no subjectAltName
//
// The latency annotations are only written on requests that took longer
// than 500 ms. A validating call that succeeds leaves no annotation of its
// own, and a validating failure names the webhook but not its
// configuration. The certificate annotations (certificate.go) name the
// server's host, not a webhook. Patches (patch.webhook.admission.k8s.io/*, Request level)
// are never read: they can hold object content.
//
// The package knows nothing about storage, HTTP or Prometheus.
package admission

import (
	"bytes"
	"encoding/json"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Annotation keys and key prefixes written by kube-apiserver.
const (
	MutationPrefix             = "mutation.webhook.admission.k8s.io/"
	FailedOpenMutationPrefix   = "failed-open.mutation.webhook.admission.k8s.io/"
	FailedOpenValidatingPrefix = "failed-open.validating.webhook.admission.k8s.io/"
	MutatingLatencyKey         = "apiserver.latency.k8s.io/mutating-webhook"
	ValidatingLatencyKey       = "apiserver.latency.k8s.io/validating-webhook"
)

// Type is the kind of an admission webhook. Values are metric label values.
type Type string

// Webhook types.
const (
	Mutating   Type = "mutating"
	Validating Type = "validating"
)

// Bounds on what one event may contribute, so a hostile event with
// thousands of made-up annotations costs little.
const (
	// MaxCallsPerRequest is far above any real admission chain.
	MaxCallsPerRequest = 256
	// MaxNameBytes is the Kubernetes limit on object names (DNS
	// subdomains), which configurations and webhooks are.
	MaxNameBytes = 253
)

// Call is one webhook call that a request's annotations record.
type Call struct {
	Type Type
	// Configuration is the Mutating- or ValidatingWebhookConfiguration.
	// kube-apiserver does not name it for validating webhooks: it is empty
	// then, unless the caller fills it in from configuration.
	Configuration string
	Webhook       string
	// Round is 1 for a reinvocation (reinvocationPolicy: IfNeeded), and
	// Index the webhook's place in the admission chain.
	Round, Index int
	Mutated      bool
	// FailedOpen marks a call that failed and was ignored
	// (failurePolicy: Ignore): the request went on without the webhook.
	FailedOpen bool
}

// Facts are the admission webhook facts of one request.
type Facts struct {
	// Calls in admission order: mutating before validating, then by round
	// and index.
	Calls []Call
	// MutatingLatency and ValidatingLatency are the time the request spent
	// in each kind of webhook, all calls together; zero when not annotated.
	MutatingLatency, ValidatingLatency time.Duration
	// Certificates are the webhook servers whose serving certificate
	// kube-apiserver flagged on this request, by host then problem.
	Certificates []CertificateIssue
	// Invalid counts webhook annotations that could not be read (a value
	// that is not what kube-apiserver writes, or calls beyond
	// MaxCallsPerRequest, hosts beyond MaxHostsPerRequest). They are left
	// out.
	Invalid int
}

// Latency is the request's total time in admission webhooks.
func (f *Facts) Latency() time.Duration { return f.MutatingLatency + f.ValidatingLatency }

// Slowed reports whether the request carries webhook latency at all: the
// apiserver annotates it only on requests slower than 500 ms.
func (f *Facts) Slowed() bool { return f.MutatingLatency > 0 || f.ValidatingLatency > 0 }

// markers are what a raw event must contain for Parse to find anything. The
// first is a substring of the next three, so events without it cost one
// scan; the certificate keys, which do not say "webhook", cost one more.
var (
	markerAny         = []byte("webhook")
	markerAnnotation  = []byte("webhook.admission.k8s.io/")
	markerMutating    = []byte(MutatingLatencyKey)
	markerValidating  = []byte(ValidatingLatencyKey)
	markerCertificate = []byte(certificateKeySuffix)
)

// MayHave is the cheap pre-filter: false means raw (an event, its
// annotations, or a whole batch of events) holds no webhook annotation, so
// decoding annotations for this package can be skipped. True may be a false
// positive (the word in a resource or user name). Keys are matched as
// kube-apiserver writes them, unescaped.
func MayHave(raw []byte) bool {
	if bytes.Contains(raw, markerAny) &&
		(bytes.Contains(raw, markerAnnotation) || bytes.Contains(raw, markerMutating) || bytes.Contains(raw, markerValidating)) {
		return true
	}
	return bytes.Contains(raw, markerCertificate)
}

// Parse reads the webhook facts from an event's annotations, given as raw
// JSON values by key. It returns nil when there are none. Values are
// decoded only for the keys it reads.
func Parse(annotations map[string]json.RawMessage) *Facts {
	f := &Facts{}
	found := false
	type slot struct {
		t            Type
		round, index int
	}
	calls := map[slot]*Call{}
	call := func(s slot) *Call {
		c, ok := calls[s]
		if !ok {
			if len(calls) >= MaxCallsPerRequest {
				f.Invalid++
				return nil
			}
			c = &Call{Type: s.t, Round: s.round, Index: s.index}
			calls[s] = c
		}
		return c
	}
	hosts := map[CertificateIssue]bool{}
	for key, raw := range annotations {
		if issue, ok, valid := certificateIssue(key, raw); ok {
			found = true
			switch {
			case !valid || len(hosts) >= MaxHostsPerRequest:
				f.Invalid++
			default:
				hosts[issue] = true
			}
			continue
		}
		switch {
		case key == MutatingLatencyKey || key == ValidatingLatencyKey:
			found = true
			d, ok := duration(raw)
			if !ok {
				f.Invalid++
				continue
			}
			if key == MutatingLatencyKey {
				f.MutatingLatency = d
			} else {
				f.ValidatingLatency = d
			}
		case strings.HasPrefix(key, FailedOpenMutationPrefix), strings.HasPrefix(key, FailedOpenValidatingPrefix):
			found = true
			t, rest := Mutating, strings.TrimPrefix(key, FailedOpenMutationPrefix)
			if strings.HasPrefix(key, FailedOpenValidatingPrefix) {
				t, rest = Validating, strings.TrimPrefix(key, FailedOpenValidatingPrefix)
			}
			round, index, ok := roundIndex(rest)
			var name string
			if ok {
				ok = json.Unmarshal(raw, &name) == nil && validName(name)
			}
			if !ok {
				f.Invalid++
				continue
			}
			if c := call(slot{t, round, index}); c != nil {
				c.FailedOpen = true
				// The mutation annotation of the same slot names the
				// webhook too, with its configuration; either may come
				// first.
				if c.Webhook == "" {
					c.Webhook = name
				}
			}
		case strings.HasPrefix(key, MutationPrefix):
			found = true
			round, index, ok := roundIndex(key[len(MutationPrefix):])
			var m struct {
				Configuration string `json:"configuration"`
				Webhook       string `json:"webhook"`
				Mutated       bool   `json:"mutated"`
			}
			if ok {
				var s string
				ok = json.Unmarshal(raw, &s) == nil && json.Unmarshal([]byte(s), &m) == nil &&
					validName(m.Webhook) && len(m.Configuration) <= MaxNameBytes
			}
			if !ok {
				f.Invalid++
				continue
			}
			if c := call(slot{Mutating, round, index}); c != nil {
				c.Configuration, c.Webhook, c.Mutated = m.Configuration, m.Webhook, m.Mutated
			}
		}
	}
	if !found {
		return nil
	}
	f.Calls = make([]Call, 0, len(calls))
	for _, c := range calls {
		f.Calls = append(f.Calls, *c)
	}
	slices.SortFunc(f.Calls, func(a, b Call) int {
		if a.Type != b.Type {
			return strings.Compare(string(a.Type), string(b.Type))
		}
		if a.Round != b.Round {
			return a.Round - b.Round
		}
		return a.Index - b.Index
	})
	if len(hosts) > 0 {
		f.Certificates = make([]CertificateIssue, 0, len(hosts))
		for issue := range hosts {
			f.Certificates = append(f.Certificates, issue)
		}
		sortIssues(f.Certificates)
	}
	return f
}

// duration reads a Go duration string such as "1.20444134s" or "723.179µs".
func duration(raw json.RawMessage) (time.Duration, bool) {
	var s string
	if json.Unmarshal(raw, &s) != nil {
		return 0, false
	}
	d, err := time.ParseDuration(s)
	if err != nil || d < 0 {
		return 0, false
	}
	return d, true
}

// roundIndex reads "round_R_index_I".
func roundIndex(s string) (round, index int, ok bool) {
	r, ok := strings.CutPrefix(s, "round_")
	if !ok {
		return 0, 0, false
	}
	rs, is, ok := strings.Cut(r, "_index_")
	if !ok {
		return 0, 0, false
	}
	round, err1 := strconv.Atoi(rs)
	index, err2 := strconv.Atoi(is)
	if err1 != nil || err2 != nil || round < 0 || index < 0 || round > 1<<16 || index > 1<<16 {
		return 0, 0, false
	}
	return round, index, true
}

func validName(s string) bool { return s != "" && len(s) <= MaxNameBytes }

// Resolver fills in the configuration of validating webhooks, which the
// annotations do not name, from webhooks listed in Sunset's configuration.
type Resolver struct {
	byWebhook map[string][]string // webhook name -> configurations
}

// WebhookID names a webhook: its configuration and its own name.
type WebhookID struct {
	Configuration string `mapstructure:"configuration" json:"configuration"`
	Webhook       string `mapstructure:"webhook" json:"webhook"`
}

// Name is how the API names a webhook: configuration.webhook, or the
// webhook alone when its configuration is unknown.
func (id WebhookID) Name() string {
	if id.Configuration == "" {
		return id.Webhook
	}
	return id.Configuration + "." + id.Webhook
}

// NewResolver indexes known webhooks by name.
func NewResolver(known []WebhookID) *Resolver {
	r := &Resolver{byWebhook: map[string][]string{}}
	for _, id := range known {
		if id.Configuration != "" && !slices.Contains(r.byWebhook[id.Webhook], id.Configuration) {
			r.byWebhook[id.Webhook] = append(r.byWebhook[id.Webhook], id.Configuration)
		}
	}
	return r
}

// Resolve fills in the configuration of calls that lack one when exactly
// one known configuration has a webhook of that name.
func (r *Resolver) Resolve(f *Facts) {
	if r == nil || f == nil {
		return
	}
	for i := range f.Calls {
		c := &f.Calls[i]
		if c.Configuration == "" {
			if cfgs := r.byWebhook[c.Webhook]; len(cfgs) == 1 {
				c.Configuration = cfgs[0]
			}
		}
	}
}

// LatencyBounds are the upper bounds of the webhook latency buckets; one
// more bucket holds everything above the last. A latency equal to a bound
// falls in that bound's bucket, as with Prometheus' le.
var LatencyBounds = [...]time.Duration{500 * time.Millisecond, time.Second, 2 * time.Second, 5 * time.Second, 10 * time.Second}

// LatencyBuckets is the number of latency buckets.
const LatencyBuckets = len(LatencyBounds) + 1

// Bucket is the index of d's latency bucket.
func Bucket(d time.Duration) int {
	for i, b := range LatencyBounds {
		if d <= b {
			return i
		}
	}
	return len(LatencyBounds)
}
