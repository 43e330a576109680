package convert

import (
	"fmt"
	"math"
)

// rules are the built-in APIs whose move is more than a new apiVersion,
// from the upstream deprecated API migration guide
// (kubernetes.io/docs/reference/using-api/deprecation-guide). An entry
// applies only while its To is the catalog's replacement; every other
// built-in entry with a replacement is SameFields.
var rules = func() map[GVK]Conversion {
	m := map[GVK]Conversion{}
	add := func(c Conversion) { m[c.From] = c }
	refuse := func(from GVK, reason string) { add(Conversion{From: from, Method: Refused, Reason: reason}) }

	ingressV1 := GVK{"networking.k8s.io", "v1", "Ingress"}
	for _, from := range []GVK{{"extensions", "v1beta1", "Ingress"}, {"networking.k8s.io", "v1beta1", "Ingress"}} {
		add(Conversion{
			From: from, To: ingressV1, Method: Fields, apply: plain(ingress),
			Reason: "backend serviceName and servicePort become service.name and service.port.number or .name, " +
				"spec.backend becomes spec.defaultBackend, and a path without pathType gets ImplementationSpecific, the old default",
		})
	}

	add(Conversion{
		From: GVK{"certificates.k8s.io", "v1beta1", "CertificateSigningRequest"}, To: GVK{"certificates.k8s.io", "v1", "CertificateSigningRequest"},
		Method: Fields, apply: plain(certificateSigningRequest),
		Reason: "v1 requires spec.signerName, which v1beta1 defaulted (the request is refused unless it names one other than " +
			"kubernetes.io/legacy-unknown), and spec.usages, which gets v1beta1's default when missing, null or empty",
	})

	add(Conversion{
		From: GVK{"policy", "v1beta1", "PodDisruptionBudget"}, To: GVK{"policy", "v1", "PodDisruptionBudget"},
		Method: Fields, apply: plain(podDisruptionBudget),
		Reason: "an empty spec.selector (no matchLabels and no matchExpressions) selects no pods in v1beta1 and every pod of the " +
			"namespace in v1; such a budget is refused",
	})
	refuse(GVK{"policy", "v1beta1", "PodSecurityPolicy"},
		"PodSecurityPolicy has no replacement; move its rules to Pod Security Admission or a policy engine")
	refuse(GVK{"extensions", "v1beta1", "PodSecurityPolicy"},
		"PodSecurityPolicy has no replacement that is still served; move its rules to Pod Security Admission or a policy engine")

	for _, kind := range []string{"MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"} {
		add(Conversion{
			From: GVK{"admissionregistration.k8s.io", "v1beta1", kind}, To: GVK{"admissionregistration.k8s.io", "v1", kind},
			Method: Fields, apply: webhookConfiguration,
			Reason: "each webhook keeps v1beta1's defaults, written out: failurePolicy Ignore, matchPolicy Exact, timeoutSeconds 30 and " +
				"admissionReviewVersions [v1beta1]; sideEffects must be None or NoneOnDryRun and webhook names unique, else it is refused",
		})
	}

	refuse(GVK{"apiextensions.k8s.io", "v1beta1", "CustomResourceDefinition"},
		"apiextensions.k8s.io/v1 moves spec.version, spec.validation, spec.subresources and spec.additionalPrinterColumns into "+
			"spec.versions[*], requires a structural schema for every version and no longer defaults preserveUnknownFields to true; "+
			"rewrite the definition by hand and check its schema")

	for _, kind := range []string{"SubjectAccessReview", "LocalSubjectAccessReview"} {
		add(Conversion{
			From: GVK{"authorization.k8s.io", "v1beta1", kind}, To: GVK{"authorization.k8s.io", "v1", kind},
			Method: Fields, apply: plain(subjectAccessReview),
			Reason: "spec.group is renamed spec.groups",
		})
	}

	workload := func(from GVK, defaults workloadDefaults) {
		add(Conversion{
			From: from, To: GVK{"apps", "v1", from.Kind}, Method: Fields, apply: defaults.apply,
			Reason: "apps/v1 requires spec.selector, which gets the template's labels as the old API defaulted it" + defaults.reason(),
		})
	}
	intMax := int64(math.MaxInt32)
	for _, v := range []string{"v1beta1", "v1beta2"} {
		workload(GVK{"apps", v, "StatefulSet"}, workloadDefaults{updateStrategyOnDelete: v == "v1beta1"})
		workload(GVK{"apps", v, "Deployment"}, workloadDefaults{revisionHistoryLimit: map[bool]int64{true: 2}[v == "v1beta1"], rollback: v == "v1beta1"})
	}
	workload(GVK{"apps", "v1beta2", "DaemonSet"}, workloadDefaults{})
	workload(GVK{"apps", "v1beta2", "ReplicaSet"}, workloadDefaults{})
	workload(GVK{"extensions", "v1beta1", "ReplicaSet"}, workloadDefaults{})
	workload(GVK{"extensions", "v1beta1", "DaemonSet"}, workloadDefaults{updateStrategyOnDelete: true, templateGeneration: true})
	workload(GVK{"extensions", "v1beta1", "Deployment"}, workloadDefaults{
		revisionHistoryLimit: intMax, progressDeadlineSeconds: intMax, rollingUpdateOne: true, rollback: true,
	})

	add(Conversion{
		From: GVK{"discovery.k8s.io", "v1beta1", "EndpointSlice"}, To: GVK{"discovery.k8s.io", "v1", "EndpointSlice"},
		Method: Fields, apply: plain(endpointSlice),
		Reason: "endpoints[*].topology[\"kubernetes.io/hostname\"] becomes nodeName and topology[\"topology.kubernetes.io/zone\"] zone; " +
			"any other topology key is refused, since v1 cannot write deprecatedTopology",
	})

	add(Conversion{
		From: GVK{"autoscaling", "v2beta1", "HorizontalPodAutoscaler"}, To: GVK{"autoscaling", "v2", "HorizontalPodAutoscaler"},
		Method: Fields, apply: plain(hpaV2beta1),
		Reason: "each metric's targetAverageUtilization, targetAverageValue and targetValue become a target of type Utilization, " +
			"AverageValue or Value, and metricName, selector and metricSelector become metric.name and metric.selector",
	})

	for _, from := range []GVK{
		{"flowcontrol.apiserver.k8s.io", "v1alpha1", "PriorityLevelConfiguration"},
		{"flowcontrol.apiserver.k8s.io", "v1beta1", "PriorityLevelConfiguration"},
		{"flowcontrol.apiserver.k8s.io", "v1beta2", "PriorityLevelConfiguration"},
	} {
		add(Conversion{
			From: from, To: GVK{"flowcontrol.apiserver.k8s.io", "v1beta3", "PriorityLevelConfiguration"},
			Method: Fields, apply: plain(priorityLevelToV1beta3),
			Reason: "spec.limited.assuredConcurrencyShares is renamed spec.limited.nominalConcurrencyShares, and a missing or 0 value, which meant 30, is written as 30",
		})
	}
	add(Conversion{
		From: GVK{"flowcontrol.apiserver.k8s.io", "v1beta3", "PriorityLevelConfiguration"},
		To:   GVK{"flowcontrol.apiserver.k8s.io", "v1", "PriorityLevelConfiguration"}, Method: Fields, apply: plain(priorityLevelToV1),
		Reason: "an explicit spec.limited.nominalConcurrencyShares of 0 meant 30 in v1beta3 and means 0 in v1, so it is written as 30, " +
			"unless the annotation " + preserveZeroShares + " says 0 is meant: then 0 is kept (a missing value written as 0) and the annotation dropped",
	})

	add(Conversion{
		From: GVK{"certificates.k8s.io", "v1beta1", "PodCertificateRequest"}, To: GVK{"certificates.k8s.io", "v1", "PodCertificateRequest"},
		Method: Fields, apply: plain(podCertificateRequest),
		Reason: "certificates.k8s.io/v1 has no spec.pkixPublicKey or spec.proofOfPossession; a request setting either is refused",
	})

	add(Conversion{
		From: GVK{"events.k8s.io", "v1beta1", "Event"}, To: GVK{"events.k8s.io", "v1", "Event"},
		Method: Fields, apply: plain(eventV1),
		Reason: "the fields are the same, but events.k8s.io/v1 creates only an event with eventTime, type Normal or Warning, " +
			"no deprecatedSource, deprecatedFirstTimestamp, deprecatedLastTimestamp or deprecatedCount, and a series (if any) " +
			"of count 2 or more with lastObservedTime; any other event is refused",
	})

	refuse(GVK{"", "v1", "Endpoints"},
		"an EndpointSlice is a different object, which the EndpointSlice mirroring controller writes from Endpoints; "+
			"change the readers and writers of Endpoints instead")
	return m
}()

// plain is a field conversion that writes no old default, which
// OmitOldDefaults would leave out.
func plain(apply func(obj map[string]any) error) func(map[string]any, options) error {
	return func(obj map[string]any, _ options) error { return apply(obj) }
}

func refused(format string, args ...any) error {
	return &RefusedError{Reason: fmt.Sprintf(format, args...)}
}

// path returns the map at keys under obj, creating it when create is set;
// nil when a key holds something other than a map.
func path(obj map[string]any, create bool, keys ...string) map[string]any {
	m := obj
	for _, k := range keys {
		next, ok := m[k].(map[string]any)
		if !ok {
			if _, present := m[k]; present || !create {
				return nil
			}
			next = map[string]any{}
			m[k] = next
		}
		m = next
	}
	return m
}

func objects(v any) []map[string]any {
	list, _ := v.([]any)
	out := make([]map[string]any, 0, len(list))
	for _, e := range list {
		if m, ok := e.(map[string]any); ok {
			out = append(out, m)
		}
	}
	return out
}

func setDefault(m map[string]any, key string, value any) {
	if _, ok := m[key]; !ok {
		m[key] = value
	}
}

func toInt(v any) (int64, bool) {
	switch n := v.(type) {
	case int:
		return int64(n), true
	case int64:
		return n, true
	case float64:
		if n != math.Trunc(n) || n < math.MinInt32 || n > math.MaxInt32 {
			return 0, false
		}
		return int64(n), true
	}
	return 0, false
}

// empty reports whether a decoded value is missing, null, {} or [].
func empty(v any) bool {
	switch x := v.(type) {
	case nil:
		return true
	case map[string]any:
		return len(x) == 0
	case []any:
		return len(x) == 0
	}
	return false
}
