package convert

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
