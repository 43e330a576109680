package gate

import (
	"encoding/json"
	"fmt"
	"strings"
)

// Kind is a kind of object that holds a cluster's Kubernetes version, and
// where: Path is the field's JSON path in dots, spec.topology.version.
type Kind struct {
	Group string `mapstructure:"group" json:"group" help:"API group of the kind, cluster.x-k8s.io."`
	Kind  string `mapstructure:"kind" json:"kind" help:"The kind, Cluster."`
	Path  string `mapstructure:"path" json:"path" help:"The field that holds the Kubernetes version, in dots from the object's root: spec.topology.version."`
}

// BuiltinKinds are the kinds known out of the box: Cluster API,
// AWS Controllers for Kubernetes, Azure Service Operator, Config
// Connector, Crossplane's Upbound AWS provider and Rancher.
func BuiltinKinds() []Kind {
	return []Kind{
		{Group: "cluster.x-k8s.io", Kind: "Cluster", Path: "spec.topology.version"},
		{Group: "controlplane.cluster.x-k8s.io", Kind: "KubeadmControlPlane", Path: "spec.version"},
		{Group: "eks.services.k8s.aws", Kind: "Cluster", Path: "spec.version"},
		{Group: "containerservice.azure.com", Kind: "ManagedCluster", Path: "spec.kubernetesVersion"},
		{Group: "container.cnrm.cloud.google.com", Kind: "ContainerCluster", Path: "spec.minMasterVersion"},
		{Group: "eks.aws.upbound.io", Kind: "Cluster", Path: "spec.forProvider.version"},
		{Group: "provisioning.cattle.io", Kind: "Cluster", Path: "spec.kubernetesVersion"},
	}
}

// maxPathDepth bounds a configured path, and so how deep an object is
// walked.
const maxPathDepth = 16

// Validate says what is wrong with k, if anything.
func (k Kind) Validate() error {
	switch {
	case k.Kind == "":
		return fmt.Errorf("kind is empty: name the kind, such as Cluster")
	case k.Path == "":
		return fmt.Errorf("%s: path is empty: name the version field, such as spec.version", k.Kind)
	}
	parts := strings.Split(k.Path, ".")
	if len(parts) > maxPathDepth {
		return fmt.Errorf("%s: path %q is deeper than %d fields", k.Kind, k.Path, maxPathDepth)
	}
	for _, p := range parts {
		if p == "" {
			return fmt.Errorf("%s: path %q has an empty field: write it in dots, such as spec.version", k.Kind, k.Path)
		}
	}
	return nil
}

// Kinds finds the version field of a kind.
type Kinds struct {
	paths map[groupKind]string
}

type groupKind struct{ group, kind string }

// NewKinds is the built-in kinds and extra; an extra kind of the same
// group and kind replaces a built-in one.
func NewKinds(extra []Kind) (*Kinds, error) {
	k := &Kinds{paths: map[groupKind]string{}}
	for _, b := range BuiltinKinds() {
		k.paths[groupKind{b.Group, b.Kind}] = b.Path
	}
	for i, e := range extra {
		if err := e.Validate(); err != nil {
			return nil, fmt.Errorf("entry %d: %w", i, err)
		}
		k.paths[groupKind{e.Group, e.Kind}] = e.Path
	}
	return k, nil
}

// Path is where objects of group and kind keep their version.
func (k *Kinds) Path(group, kind string) (string, bool) {
	p, ok := k.paths[groupKind{group, kind}]
	return p, ok
}

// VersionAt reads the string at path in the JSON object obj, decoding
// only the fields on the way. found is false when a field on the way is
// missing or null; an error says that what is there is not a string.
func VersionAt(obj []byte, path string) (value string, found bool, err error) {
	cur := json.RawMessage(obj)
	for _, field := range strings.Split(path, ".") {
		var m map[string]json.RawMessage
		if err := json.Unmarshal(cur, &m); err != nil {
			return "", false, fmt.Errorf("%s: the object is not JSON objects down to the field", path)
		}
		next, ok := m[field]
		if !ok || string(next) == "null" {
			return "", false, nil
		}
		cur = next
	}
	if err := json.Unmarshal(cur, &value); err != nil {
		return "", false, fmt.Errorf("%s holds %s, not a version string", path, abbreviate(string(cur)))
	}
	return value, true, nil
}

// abbreviate keeps what a message quotes of an object short.
func abbreviate(s string) string {
	const max = 40
	if len(s) > max {
		return s[:max] + "…"
	}
	return s
}
