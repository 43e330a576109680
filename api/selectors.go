package api

import (
	"fmt"
	"net/url"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
)

// selectors are a list's labelSelector and fieldSelector.
type selectors struct {
	labels labels.Selector
	fields fields.Selector
}

// parseSelectors reads labelSelector and fieldSelector; the only field is
// metadata.name, as for most Kubernetes resources.
func parseSelectors(v url.Values) (selectors, error) {
	ls, err := labels.Parse(v.Get("labelSelector"))
	if err != nil {
		return selectors{}, fmt.Errorf("labelSelector: %w", err)
	}
	fs, err := fields.ParseSelector(v.Get("fieldSelector"))
	if err != nil {
		return selectors{}, fmt.Errorf("fieldSelector: %w", err)
	}
	for _, req := range fs.Requirements() {
		if req.Field != "metadata.name" {
			return selectors{}, fmt.Errorf("fieldSelector: field label not supported: %s (the only one is metadata.name)", req.Field)
		}
	}
	return selectors{labels: ls, fields: fs}, nil
}

func (s selectors) matches(meta metav1.ObjectMeta) bool {
	return s.labels.Matches(labels.Set(meta.Labels)) && s.fields.Matches(fields.Set{"metadata.name": meta.Name})
}
