package admission

import (
	"sync"
)

// Other is the label value that stands for every resource or webhook beyond
// the caps.
const Other = "other"

// Default caps on label values, beyond the configured resources and
// webhooks.
const (
	DefaultMaxResources = 100
	DefaultMaxWebhooks  = 50
)

// maxFoldedTracked bounds the memory spent on remembering which values were
// folded, for the count a metric reports.
const maxFoldedTracked = 10000

// LabelOptions configures NewLabels.
type LabelOptions struct {
	// Classes: resources in a class always get their own label values.
	Classes *Classes
	// Webhooks always get their own label values.
	Webhooks []WebhookID
	// MaxResources and MaxWebhooks cap the other resources and webhooks
	// that get their own label values, first come first served; zero
	// means the defaults.
	MaxResources, MaxWebhooks int
	// OnFirstFold, if set, is called the first time a resource ("resource")
	// or a webhook ("webhook") is folded into Other.
	OnFirstFold func(kind string)
}

// ResourceLabels are the label values of one resource.
type ResourceLabels struct {
	Group, Version, Resource, Subresource string
	Class                                 Class
}

type resourceKey struct{ group, version, resource, subresource string }

// Labels hands out bounded metric label values for resources and webhooks:
// configured ones always, others until a cap, and Other beyond it. One
// Labels is shared by every metric of the process, so a resource has the
// same labels everywhere. It is safe for concurrent use.
type Labels struct {
	o          LabelOptions
	configured map[WebhookID]bool

	mu        sync.Mutex
	resources capped[resourceKey]
	webhooks  capped[WebhookID]
}

// capped admits values up to max, first come first served, and remembers
// the ones it folds (up to maxFoldedTracked).
type capped[K comparable] struct {
	max      int
	admitted map[K]bool
	folded   map[K]bool
	notified bool
}

func newCapped[K comparable](limit int) capped[K] {
	return capped[K]{max: limit, admitted: map[K]bool{}, folded: map[K]bool{}}
}

// admit reports whether k keeps its own label values and, when it does not,
// whether this is the first value folded.
func (c *capped[K]) admit(k K) (own, firstFold bool) {
	if c.admitted[k] || len(c.admitted) < c.max {
		c.admitted[k] = true
		return true, false
	}
	if len(c.folded) < maxFoldedTracked {
		c.folded[k] = true
	}
	first := !c.notified
	c.notified = true
	return false, first
}

// NewLabels builds a Labels.
func NewLabels(o LabelOptions) *Labels {
	if o.Classes == nil {
		o.Classes, _ = NewClasses(DefaultClasses())
	}
	if o.MaxResources <= 0 {
		o.MaxResources = DefaultMaxResources
	}
	if o.MaxWebhooks <= 0 {
		o.MaxWebhooks = DefaultMaxWebhooks
	}
	l := &Labels{o: o, configured: map[WebhookID]bool{},
		resources: newCapped[resourceKey](o.MaxResources), webhooks: newCapped[WebhookID](o.MaxWebhooks)}
	for _, id := range o.Webhooks {
		l.configured[id] = true
	}
	return l
}

// Resource returns the label values of a resource.
func (l *Labels) Resource(group, version, resource, subresource string) ResourceLabels {
	class := l.o.Classes.Primary(resource, subresource)
	own := ResourceLabels{Group: group, Version: version, Resource: resource, Subresource: subresource, Class: class}
	if class != NoClass {
		return own
	}
	l.mu.Lock()
	ok, first := l.resources.admit(resourceKey{group, version, resource, subresource})
	l.mu.Unlock()
	if ok {
		return own
	}
	l.notify(first, "resource")
	return ResourceLabels{Resource: Other, Class: NoClass}
}

// Webhook returns the label values of a webhook.
func (l *Labels) Webhook(id WebhookID) WebhookID {
	// Every webhook has a name; a row without one holds a server's
	// certificate problems, which must not take a webhook's place under
	// the cap.
	if l.configured[id] || id.Webhook == "" {
		return id
	}
	l.mu.Lock()
	ok, first := l.webhooks.admit(id)
	l.mu.Unlock()
	if ok {
		return id
	}
	l.notify(first, "webhook")
	return WebhookID{Webhook: Other}
}

// notify runs outside the lock, so the callback may do anything.
func (l *Labels) notify(first bool, kind string) {
	if first && l.o.OnFirstFold != nil {
		l.o.OnFirstFold(kind)
	}
}

// Folded counts the distinct resources and webhooks folded into Other so
// far (up to 10,000 each).
func (l *Labels) Folded() (resources, webhooks int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.resources.folded), len(l.webhooks.folded)
}
