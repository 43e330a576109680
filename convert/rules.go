package convert

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
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

func ingress(obj map[string]any) error {
	spec := path(obj, false, "spec")
	if spec == nil {
		return nil
	}
	if b, ok := spec["backend"]; ok {
		if _, both := spec["defaultBackend"]; both {
			return refused("spec has both backend and defaultBackend")
		}
		bm, ok := b.(map[string]any)
		if !ok {
			return refused("spec.backend is not an object")
		}
		if err := ingressBackend(bm, "spec.backend"); err != nil {
			return err
		}
		delete(spec, "backend")
		spec["defaultBackend"] = bm
	}
	for i, rule := range objects(spec["rules"]) {
		for j, p := range objects(path(rule, false, "http")["paths"]) {
			setDefault(p, "pathType", "ImplementationSpecific")
			b, ok := p["backend"].(map[string]any)
			if !ok {
				return refused("spec.rules[%d].http.paths[%d].backend is missing or not an object", i, j)
			}
			if err := ingressBackend(b, fmt.Sprintf("spec.rules[%d].http.paths[%d].backend", i, j)); err != nil {
				return err
			}
		}
	}
	return nil
}

// ingressBackend moves serviceName and servicePort to service.name and
// service.port; a resource backend is the same in both.
func ingressBackend(b map[string]any, at string) error {
	name, hasName := b["serviceName"]
	port, hasPort := b["servicePort"]
	if !hasName && !hasPort {
		return nil
	}
	ns, ok := name.(string)
	if !ok || ns == "" {
		return refused("%s.serviceName is missing or not a string", at)
	}
	portField := map[string]any{}
	switch p := port.(type) {
	case string:
		// servicePort is an IntOrString, which JSON decodes by its type:
		// a quoted "8080" is a string, and the apiserver's conversion
		// (pkg/apis/networking/v1beta1 Convert_v1beta1_IngressBackend_To_networking_IngressBackend)
		// makes any string the port's name, digits or not.
		portField["name"] = p
	case int, int64, float64:
		n, ok := toInt(p)
		if !ok {
			return refused("%s.servicePort %v is not a port number", at, p)
		}
		portField["number"] = n
	default:
		return refused("%s.servicePort is missing or neither a number nor a name", at)
	}
	delete(b, "serviceName")
	delete(b, "servicePort")
	b["service"] = map[string]any{"name": ns, "port": portField}
	return nil
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

func certificateSigningRequest(obj map[string]any) error {
	spec := path(obj, false, "spec")
	if spec == nil {
		return refused("spec is missing")
	}
	signer, _ := spec["signerName"].(string)
	switch signer {
	case "":
		return refused("spec.signerName is missing: v1beta1 picked one from the request's contents, v1 requires it; name the signer")
	case "kubernetes.io/legacy-unknown":
		return refused("certificates.k8s.io/v1 refuses to create requests for kubernetes.io/legacy-unknown; name another signer")
	}
	// v1beta1 defaulted nil usages: a missing or null key, and an empty
	// list from any client that sent it by protobuf or by Go's JSON, whose
	// omitempty drops it. v1 requires at least one usage.
	if empty(spec["usages"]) {
		spec["usages"] = []any{"digital signature", "key encipherment"}
	}
	return nil
}

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

func subjectAccessReview(obj map[string]any) error {
	spec := path(obj, false, "spec")
	if g, ok := spec["group"]; ok {
		if _, both := spec["groups"]; both {
			return refused("spec has both group and groups")
		}
		delete(spec, "group")
		spec["groups"] = g
	}
	return nil
}

// workloadDefaults are the fields whose defaults apps/v1 changed, per old
// API: each is written out with the old default when the object leaves
// it unset, so the workload behaves as it did.
type workloadDefaults struct {
	// updateStrategyOnDelete: the old API defaulted
	// spec.updateStrategy.type to OnDelete, apps/v1 to RollingUpdate.
	updateStrategyOnDelete bool
	// revisionHistoryLimit and progressDeadlineSeconds are the old
	// defaults; 0 when they equal apps/v1's (10 and 600 seconds).
	// MaxInt32 is how "keep all" and "no deadline" are written.
	revisionHistoryLimit, progressDeadlineSeconds int64
	// rollingUpdateOne: maxSurge and maxUnavailable defaulted to 1, not 25%.
	rollingUpdateOne bool
	// rollback and templateGeneration are fields apps/v1 removed.
	rollback, templateGeneration bool
}

func (d workloadDefaults) reason() string {
	var parts []string
	if d.updateStrategyOnDelete {
		parts = append(parts, "spec.updateStrategy.type OnDelete")
	}
	if d.revisionHistoryLimit != 0 {
		parts = append(parts, fmt.Sprintf("spec.revisionHistoryLimit %d", d.revisionHistoryLimit))
	}
	if d.progressDeadlineSeconds != 0 {
		parts = append(parts, fmt.Sprintf("spec.progressDeadlineSeconds %d", d.progressDeadlineSeconds))
	}
	if d.rollingUpdateOne {
		parts = append(parts, "spec.strategy.rollingUpdate maxSurge 1 and maxUnavailable 1")
	}
	s := ""
	if len(parts) > 0 {
		s = "; the old defaults are written out where unset: " + strings.Join(parts, ", ")
	}
	var removed []string
	if d.rollback {
		removed = append(removed, "spec.rollbackTo")
	}
	if d.templateGeneration {
		removed = append(removed, "spec.templateGeneration")
	}
	if len(removed) > 0 {
		s += "; an object setting " + strings.Join(removed, " or ") + ", which apps/v1 removed, is refused"
	}
	return s
}

func (d workloadDefaults) apply(obj map[string]any, o options) error {
	spec := path(obj, false, "spec")
	if spec == nil {
		return refused("spec is missing")
	}
	for _, f := range []struct {
		on   bool
		name string
	}{{d.rollback, "rollbackTo"}, {d.templateGeneration, "templateGeneration"}} {
		if _, set := spec[f.name]; f.on && set {
			return refused("spec.%s is set, and apps/v1 has no such field", f.name)
		}
	}
	if _, ok := spec["selector"]; !ok {
		labels, ok := path(spec, false, "template", "metadata")["labels"].(map[string]any)
		if !ok || len(labels) == 0 {
			return refused("spec.selector is missing and the pod template has no labels to take it from")
		}
		spec["selector"] = map[string]any{"matchLabels": deepCopy(labels)}
	}
	if o.omitOldDefaults {
		return nil
	}
	if d.updateStrategyOnDelete {
		// The old API defaulted an empty type, not a missing
		// updateStrategy: {} and {type: ""} meant OnDelete too.
		if spec["updateStrategy"] == nil {
			spec["updateStrategy"] = map[string]any{}
		}
		strategy, ok := spec["updateStrategy"].(map[string]any)
		if !ok {
			return refused("spec.updateStrategy is not an object")
		}
		if t, _ := strategy["type"].(string); t == "" {
			strategy["type"] = "OnDelete"
		}
	}
	if d.revisionHistoryLimit != 0 {
		setDefault(spec, "revisionHistoryLimit", d.revisionHistoryLimit)
	}
	if d.progressDeadlineSeconds != 0 {
		setDefault(spec, "progressDeadlineSeconds", d.progressDeadlineSeconds)
	}
	if d.rollingUpdateOne {
		strategy := path(spec, true, "strategy")
		if strategy == nil {
			return refused("spec.strategy is not an object")
		}
		if t, _ := strategy["type"].(string); t == "" || t == "RollingUpdate" {
			strategy["type"] = "RollingUpdate"
			ru := path(strategy, true, "rollingUpdate")
			if ru == nil {
				return refused("spec.strategy.rollingUpdate is not an object")
			}
			setDefault(ru, "maxSurge", int64(1))
			setDefault(ru, "maxUnavailable", int64(1))
		}
	}
	return nil
}

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

func hpaV2beta1(obj map[string]any) error {
	for i, metric := range objects(path(obj, false, "spec")["metrics"]) {
		typ, _ := metric["type"].(string)
		at := fmt.Sprintf("spec.metrics[%d]", i)
		var err error
		switch typ {
		case "Resource", "ContainerResource":
			err = hpaResource(metric, typ, at)
		case "Pods":
			err = hpaPods(metric, at)
		case "Object":
			err = hpaObject(metric, at)
		case "External":
			err = hpaExternal(metric, at)
		default:
			err = refused("%s.type %q is not a metric type autoscaling/v2beta1 has", at, typ)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// hpaSource is the metric's source object, such as metrics[0].resource.
func hpaSource(metric map[string]any, typ, at string) (map[string]any, string, error) {
	key := strings.ToLower(typ[:1]) + typ[1:]
	src, ok := metric[key].(map[string]any)
	if !ok {
		return nil, "", refused("%s.%s is missing or not an object", at, key)
	}
	return src, at + "." + key, nil
}

// hpaTarget moves exactly one of the old target fields into target.
func hpaTarget(src map[string]any, at string, fields map[string][2]string) error {
	target := map[string]any{}
	for _, old := range slices.Sorted(maps.Keys(fields)) {
		v, ok := src[old]
		if !ok {
			continue
		}
		if len(target) > 0 {
			return refused("%s sets more than one target", at)
		}
		target["type"], target[fields[old][1]] = fields[old][0], v
		delete(src, old)
	}
	if len(target) == 0 {
		return refused("%s sets no target", at)
	}
	src["target"] = target
	return nil
}

// hpaMetric moves metricName and a selector into metric.
func hpaMetric(src map[string]any, selectorKey string) {
	metric := map[string]any{}
	if n, ok := src["metricName"]; ok {
		metric["name"] = n
		delete(src, "metricName")
	}
	if s, ok := src[selectorKey]; ok {
		metric["selector"] = s
		delete(src, selectorKey)
	}
	src["metric"] = metric
}

func hpaResource(metric map[string]any, typ, at string) error {
	src, at, err := hpaSource(metric, typ, at)
	if err != nil {
		return err
	}
	return hpaTarget(src, at, map[string][2]string{
		"targetAverageUtilization": {"Utilization", "averageUtilization"},
		"targetAverageValue":       {"AverageValue", "averageValue"},
	})
}

func hpaPods(metric map[string]any, at string) error {
	src, at, err := hpaSource(metric, "Pods", at)
	if err != nil {
		return err
	}
	if err := hpaTarget(src, at, map[string][2]string{"targetAverageValue": {"AverageValue", "averageValue"}}); err != nil {
		return err
	}
	hpaMetric(src, "selector")
	return nil
}

func hpaObject(metric map[string]any, at string) error {
	src, at, err := hpaSource(metric, "Object", at)
	if err != nil {
		return err
	}
	described, ok := src["target"]
	if !ok {
		return refused("%s.target (the described object) is missing", at)
	}
	delete(src, "target")
	if err := hpaTarget(src, at, map[string][2]string{
		"targetValue":  {"Value", "value"},
		"averageValue": {"AverageValue", "averageValue"},
	}); err != nil {
		return err
	}
	src["describedObject"] = described
	hpaMetric(src, "selector")
	return nil
}

func hpaExternal(metric map[string]any, at string) error {
	src, at, err := hpaSource(metric, "External", at)
	if err != nil {
		return err
	}
	if err := hpaTarget(src, at, map[string][2]string{
		"targetValue":        {"Value", "value"},
		"targetAverageValue": {"AverageValue", "averageValue"},
	}); err != nil {
		return err
	}
	hpaMetric(src, "metricSelector")
	return nil
}

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

func podCertificateRequest(obj map[string]any) error {
	spec := path(obj, false, "spec")
	for _, f := range []string{"pkixPublicKey", "proofOfPossession"} {
		if _, set := spec[f]; set {
			return refused("spec.%s is set, and certificates.k8s.io/v1 has no such field; send the key in spec.stubPKCS10Request", f)
		}
	}
	return nil
}

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
