package convert

import (
	"maps"
	"slices"
)

func endpointSlice(obj map[string]any) error {
	for i, ep := range objects(obj["endpoints"]) {
		topo, ok := ep["topology"].(map[string]any)
		if !ok {
			continue
		}
		for _, k := range slices.Sorted(maps.Keys(topo)) {
			var field string
			switch k {
			case "kubernetes.io/hostname":
				field = "nodeName"
			case "topology.kubernetes.io/zone":
				field = "zone"
			default:
				return refused("endpoints[%d].topology[%q] has no field in discovery.k8s.io/v1", i, k)
			}
			if _, set := ep[field]; set {
				return refused("endpoints[%d] sets both topology[%q] and %s", i, k, field)
			}
			ep[field] = topo[k]
		}
		delete(ep, "topology")
	}
	return nil
}
