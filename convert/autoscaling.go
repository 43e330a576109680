package convert

import (
	"fmt"
	"maps"
	"slices"
	"strings"
)

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
