package convert

import (
	"fmt"
	"strings"
)

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
