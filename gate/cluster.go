package gate

import "strings"

// ClusterLabel, as a label or an annotation on an object, names the
// Sunset cluster the object stands for.
const ClusterLabel = "sunset.dev/cluster"

// CAPIClusterNameLabel is the label Cluster API puts on the objects of a
// cluster (a KubeadmControlPlane, say), naming its Cluster.
const CAPIClusterNameLabel = "cluster.x-k8s.io/cluster-name"

// OverrideAnnotation on an object lets a refused upgrade through; its
// value is the reason, which must not be empty.
const OverrideAnnotation = "sunset.dev/upgrade-override"

// Meta is what the gate reads of an object's metadata.
type Meta struct {
	Namespace   string            `json:"namespace"`
	Name        string            `json:"name"`
	Labels      map[string]string `json:"labels"`
	Annotations map[string]string `json:"annotations"`
}

// Key is namespace/name, or the name of a cluster-scoped object: how
// gate.clusters names objects.
func (m Meta) Key() string {
	if m.Namespace == "" {
		return m.Name
	}
	return m.Namespace + "/" + m.Name
}

// ClusterFor is the Sunset cluster an object stands for: its
// sunset.dev/cluster label, else that annotation, else what clusters maps
// its namespace/name to, else its name. An object Cluster API labels with
// its Cluster's name (a KubeadmControlPlane named prod-control-plane)
// stands for that Cluster: the map and the name fallback use the
// Cluster's name, so that the control plane is judged as its Cluster is.
func ClusterFor(m Meta, clusters map[string]string) string {
	if c := strings.TrimSpace(m.Labels[ClusterLabel]); c != "" {
		return c
	}
	if c := strings.TrimSpace(m.Annotations[ClusterLabel]); c != "" {
		return c
	}
	if c := strings.TrimSpace(m.Labels[CAPIClusterNameLabel]); c != "" {
		m.Name = c
	}
	// The config loader lowercases map keys; object names are lowercase
	// already.
	if c := clusters[strings.ToLower(m.Key())]; c != "" {
		return c
	}
	return m.Name
}

// Override is the reason of an object's override annotation; "" when it
// has none or an empty one.
func Override(m Meta) string {
	return strings.TrimSpace(m.Annotations[OverrideAnnotation])
}
