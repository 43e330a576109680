package admission

import (
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
)

// Class is a class of resources whose webhooks an administrator watches
// more closely. Values are metric label values.
type Class string

// Resource classes, after OpenShift's webhook supportability enhancement.
const (
	// Critical resources are scalability and stability bottlenecks when a
	// webhook sits on them: a slow webhook there slows the cluster.
	Critical Class = "critical"
	// Security resources hold or grant credentials: every webhook on them
	// sees secrets and tokens in plain text.
	Security Class = "security"
	// Virtual resources are not stored (reviews, bindings): a webhook on
	// them is almost always a mistake.
	Virtual Class = "virtual"
	// NoClass labels resources in none of the classes.
	NoClass Class = "none"
)

// ClassOrder is the precedence when a resource is in several classes and
// one label value must be chosen.
var ClassOrder = []Class{Critical, Security, Virtual}

// DefaultClasses returns the classes of the enhancement: critical resources
// (with Sunset's own apirequestcounts), security-sensitive ones, and
// virtual ones.
func DefaultClasses() map[Class][]string {
	return map[Class][]string{
		Critical: {"endpoints", "endpointslices", "events", "pods", "resourcequotas", "apirequestcounts"},
		Security: {"secrets", "serviceaccounts", "mutatingwebhookconfigurations", "validatingwebhookconfigurations",
			"tokenreviews", "certificatesigningrequests"},
		Virtual: {"bindings", "*reviews"},
	}
}

// ParseClass reads a class name, for ?class= and --class.
func ParseClass(s string) (Class, error) {
	if c := Class(s); slices.Contains(ClassOrder, c) {
		return c, nil
	}
	return "", fmt.Errorf("class %q is not one of critical, security, virtual", s)
}

// pattern is one class entry: a resource name, or "*suffix" for every
// resource ending in suffix, optionally with "/subresource".
type pattern struct {
	suffix                bool
	resource, subresource string
}

func (p pattern) match(resource, subresource string) bool {
	if p.subresource != "" && p.subresource != subresource {
		return false
	}
	if p.suffix {
		return strings.HasSuffix(resource, p.resource)
	}
	return resource == p.resource
}

// Classes says which classes a resource is in.
type Classes struct {
	patterns map[Class][]pattern
}

var entryRe = regexp.MustCompile(`^(\*|\*?[a-z0-9]([-a-z0-9.]*[a-z0-9])?)(/[a-z0-9]+)?$`)

// NewClasses checks and compiles class entries: plural resource names as
// audit events give them ("pods", any group), "*suffix" ("*reviews"), each
// optionally with "/subresource" ("pods/binding"); a plain name covers all
// its subresources. Every problem is reported at once.
func NewClasses(classes map[Class][]string) (*Classes, error) {
	c := &Classes{patterns: map[Class][]pattern{}}
	var errs []error
	for _, cl := range ClassOrder {
		for _, e := range classes[cl] {
			if !entryRe.MatchString(e) {
				errs = append(errs, fmt.Errorf("admission.classes.%s: %q is not a plural resource name such as pods, a suffix such as *reviews, or either with /subresource", cl, e))
				continue
			}
			res, sub, _ := strings.Cut(e, "/")
			p := pattern{resource: res, subresource: sub}
			if strings.HasPrefix(res, "*") {
				p.suffix, p.resource = true, res[1:]
			}
			c.patterns[cl] = append(c.patterns[cl], p)
		}
	}
	for cl := range classes {
		if !slices.Contains(ClassOrder, cl) {
			errs = append(errs, fmt.Errorf("admission.classes: %q is not one of critical, security, virtual", cl))
		}
	}
	return c, errors.Join(errs...)
}

// In reports whether a resource is in class cl.
func (c *Classes) In(cl Class, resource, subresource string) bool {
	for _, p := range c.patterns[cl] {
		if p.match(resource, subresource) {
			return true
		}
	}
	return false
}

// Of lists the classes a resource is in, in ClassOrder.
func (c *Classes) Of(resource, subresource string) []Class {
	var out []Class
	for _, cl := range ClassOrder {
		if c.In(cl, resource, subresource) {
			out = append(out, cl)
		}
	}
	return out
}

// Primary is the first class of a resource in ClassOrder, or NoClass: the
// value of the class label.
func (c *Classes) Primary(resource, subresource string) Class {
	for _, cl := range ClassOrder {
		if c.In(cl, resource, subresource) {
			return cl
		}
	}
	return NoClass
}
