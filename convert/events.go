package convert

// eventV1 refuses what kube-apiserver's strict validation of an
// events.k8s.io/v1 create rejects and its v1beta1 accepted
// (pkg/apis/core/validation ValidateEventCreate); the fields are the same.
func eventV1(obj map[string]any) error {
	if empty(obj["eventTime"]) {
		return refused("eventTime is missing, and events.k8s.io/v1 requires it")
	}
	switch t, _ := obj["type"].(string); t {
	case "Normal", "Warning":
	default:
		return refused("type is %q; events.k8s.io/v1 allows only Normal and Warning", t)
	}
	for _, f := range []string{"deprecatedFirstTimestamp", "deprecatedLastTimestamp"} {
		if !empty(obj[f]) {
			return refused("%s is set, and events.k8s.io/v1 creates only events without it", f)
		}
	}
	if n, ok := toInt(obj["deprecatedCount"]); ok && n != 0 {
		return refused("deprecatedCount is set, and events.k8s.io/v1 creates only events without it")
	} else if !ok && obj["deprecatedCount"] != nil {
		return refused("deprecatedCount is not a number")
	}
	if src, ok := obj["deprecatedSource"].(map[string]any); ok {
		for _, f := range []string{"component", "host"} {
			if s, _ := src[f].(string); s != "" {
				return refused("deprecatedSource.%s is set, and events.k8s.io/v1 creates only events without it", f)
			}
		}
	}
	if series, ok := obj["series"].(map[string]any); ok {
		if n, _ := toInt(series["count"]); n < 2 {
			return refused("series.count is less than 2, which events.k8s.io/v1 requires")
		}
		if empty(series["lastObservedTime"]) {
			return refused("series.lastObservedTime is missing, and events.k8s.io/v1 requires it")
		}
	}
	return nil
}
