package convert

import (
	"fmt"
)

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
