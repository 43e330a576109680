package catalog

// File is the YAML layout of builtin.yaml and of catalog.extra.
type File struct {
	APIs []Entry `json:"apis"`
}

// Entry is the lifecycle of one API: a group, version and resource.
type Entry struct {
	// Group is empty for the core group.
	Group    string `json:"group"`
	Version  string `json:"version"`
	Resource string `json:"resource"`
	Kind     string `json:"kind"`
	// Releases as "1.22". Empty RemovedIn means no removal is planned.
	IntroducedIn string `json:"introducedIn,omitempty"`
	DeprecatedIn string `json:"deprecatedIn,omitempty"`
	RemovedIn    string `json:"removedIn,omitempty"`
	Replacement  *Ref   `json:"replacement,omitempty"`
	// Source says where the facts come from.
	Source string `json:"source,omitempty"`
	// Extra is set on the entries configuration added (catalog.extra),
	// built-in ones it replaced included, so that a judgement can say
	// which it came from.
	Extra bool `json:"-"`
}

// Ref names an API by group, version, kind and resource.
type Ref struct {
	Group    string `json:"group"`
	Version  string `json:"version"`
	Kind     string `json:"kind"`
	Resource string `json:"resource"`
}

// States of a deprecated API: StateRemoved once the release that removes it
// has come (in the cluster, or at an upgrade's target), StateDeprecated
// before. They are the values of the state metric label, of ?state= and of
// a check finding's severity.
const (
	StateDeprecated = "deprecated"
	StateRemoved    = "removed"
)
