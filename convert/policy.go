package convert

func podDisruptionBudget(obj map[string]any) error {
	sel, ok := path(obj, false, "spec")["selector"].(map[string]any)
	if !ok {
		// A missing or null selector selects no pods in both versions.
		return nil
	}
	if empty(sel["matchLabels"]) && empty(sel["matchExpressions"]) {
		return refused("spec.selector has no matchLabels and no matchExpressions: it selects no pods in policy/v1beta1 and " +
			"every pod in the namespace in policy/v1; remove it or write the labels meant")
	}
	return nil
}
