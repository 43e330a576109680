package convert

func priorityLevelToV1beta3(obj map[string]any) error {
	limited := path(obj, false, "spec", "limited")
	if limited == nil {
		return nil
	}
	// A missing or 0 assuredConcurrencyShares meant 30; v1beta3 keeps 0
	// under its preserve-zero annotation, so the default is written out.
	v, ok := limited["assuredConcurrencyShares"]
	if n, isInt := toInt(v); !ok || isInt && n == 0 {
		v = int64(30)
	}
	delete(limited, "assuredConcurrencyShares")
	limited["nominalConcurrencyShares"] = v
	return nil
}

// preserveZeroShares is the annotation with which a v1beta3
// PriorityLevelConfiguration says that its nominalConcurrencyShares of 0
// is meant, not unset; kube-apiserver writes it when it reads a v1 object
// with 0 shares back at v1beta3, and drops it on the way to v1.
const preserveZeroShares = "flowcontrol.k8s.io/v1beta3-preserve-zero-concurrency-shares"

func priorityLevelToV1(obj map[string]any) error {
	annotations := path(obj, false, "metadata", "annotations")
	_, preserveZero := annotations[preserveZeroShares]
	if preserveZero {
		delete(annotations, preserveZeroShares)
		if len(annotations) == 0 {
			delete(path(obj, false, "metadata"), "annotations")
		}
	}
	limited := path(obj, false, "spec", "limited")
	if limited == nil {
		return nil
	}
	v, ok := limited["nominalConcurrencyShares"]
	if n, isInt := toInt(v); !ok || isInt && n == 0 {
		// v1beta3 defaulted 0 (missing or written) to 30 unless the
		// annotation was there; v1 keeps a written 0 and defaults a
		// missing one to 30.
		if preserveZero {
			limited["nominalConcurrencyShares"] = int64(0)
		} else if ok {
			limited["nominalConcurrencyShares"] = int64(30)
		}
	}
	return nil
}
