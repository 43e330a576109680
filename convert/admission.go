package convert

func webhookConfiguration(obj map[string]any, o options) error {
	seen := map[string]bool{}
	for i, w := range objects(obj["webhooks"]) {
		name, _ := w["name"].(string)
		if seen[name] {
			return refused("webhooks[%d].name %q is not unique, which admissionregistration.k8s.io/v1 requires", i, name)
		}
		seen[name] = true
		switch se, _ := w["sideEffects"].(string); se {
		case "None", "NoneOnDryRun":
		case "":
			return refused("webhooks[%d].sideEffects is missing: v1beta1 defaulted it to Unknown, which v1 does not allow; "+
				"set None or NoneOnDryRun if the webhook has no side effects on dry runs", i)
		default:
			return refused("webhooks[%d].sideEffects is %s, which v1 does not allow; only None and NoneOnDryRun are", i, se)
		}
		// v1 requires admissionReviewVersions, whatever the options.
		setDefault(w, "admissionReviewVersions", []any{"v1beta1"})
		if o.omitOldDefaults {
			continue
		}
		setDefault(w, "failurePolicy", "Ignore")
		setDefault(w, "matchPolicy", "Exact")
		setDefault(w, "timeoutSeconds", int64(30))
	}
	return nil
}
