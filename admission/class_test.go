package admission

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestDefaultClasses(t *testing.T) {
	c, err := NewClasses(DefaultClasses())
	require.NoError(t, err)
	for _, tc := range []struct {
		resource, subresource string
		classes               []Class
		primary               Class
	}{
		{"pods", "", []Class{Critical}, Critical},
		{"pods", "status", []Class{Critical}, Critical},
		{"events", "", []Class{Critical}, Critical},
		{"apirequestcounts", "", []Class{Critical}, Critical},
		{"secrets", "", []Class{Security}, Security},
		{"tokenreviews", "", []Class{Security, Virtual}, Security},
		{"subjectaccessreviews", "", []Class{Virtual}, Virtual},
		{"bindings", "", []Class{Virtual}, Virtual},
		{"widgets", "", nil, NoClass},
		{"configmaps", "", nil, NoClass},
	} {
		require.Equal(t, tc.classes, c.Of(tc.resource, tc.subresource), tc.resource)
		require.Equal(t, tc.primary, c.Primary(tc.resource, tc.subresource), tc.resource)
	}
}

func TestClassEntries(t *testing.T) {
	c, err := NewClasses(map[Class][]string{Virtual: {"pods/binding"}, Critical: {"*"}})
	require.NoError(t, err)
	require.True(t, c.In(Virtual, "pods", "binding"))
	require.False(t, c.In(Virtual, "pods", ""))
	require.True(t, c.In(Critical, "anything", ""))

	_, err = NewClasses(map[Class][]string{Critical: {"Pods", "pods/", "", "ok"}, "hot": {"pods"}})
	require.EqualError(t, err, `admission.classes.critical: "Pods" is not a plural resource name such as pods, a suffix such as *reviews, or either with /subresource
admission.classes.critical: "pods/" is not a plural resource name such as pods, a suffix such as *reviews, or either with /subresource
admission.classes.critical: "" is not a plural resource name such as pods, a suffix such as *reviews, or either with /subresource
admission.classes: "hot" is not one of critical, security, virtual`)

	_, err = ParseClass("security")
	require.NoError(t, err)
	_, err = ParseClass("secure")
	require.EqualError(t, err, `class "secure" is not one of critical, security, virtual`)
}

func TestLabelsAreBounded(t *testing.T) {
	var folds []string
	l := NewLabels(LabelOptions{
		MaxResources: 2, MaxWebhooks: 1,
		Webhooks:    []WebhookID{{"istio", "sidecar-injector.istio.io"}},
		OnFirstFold: func(kind string) { folds = append(folds, kind) },
	})
	own := func(g, v, r string, cl Class) ResourceLabels {
		return ResourceLabels{Group: g, Version: v, Resource: r, Class: cl}
	}
	other := ResourceLabels{Resource: Other, Class: NoClass}
	require.Equal(t, own("", "v1", "configmaps", NoClass), l.Resource("", "v1", "configmaps", ""))
	require.Equal(t, own("e2e.example.com", "v1", "widgets", NoClass), l.Resource("e2e.example.com", "v1", "widgets", ""))
	require.Equal(t, other, l.Resource("apps", "v1", "deployments", ""))
	require.Equal(t, other, l.Resource("apps", "v1", "statefulsets", ""))
	// Classed resources and those already admitted keep their labels.
	require.Equal(t, own("", "v1", "pods", Critical), l.Resource("", "v1", "pods", ""))
	require.Equal(t, own("", "v1", "configmaps", NoClass), l.Resource("", "v1", "configmaps", ""))

	require.Equal(t, WebhookID{"a", "a.example.com"}, l.Webhook(WebhookID{"a", "a.example.com"}))
	require.Equal(t, WebhookID{Webhook: Other}, l.Webhook(WebhookID{"b", "b.example.com"}))
	require.Equal(t, WebhookID{"istio", "sidecar-injector.istio.io"}, l.Webhook(WebhookID{"istio", "sidecar-injector.istio.io"}))
	require.Equal(t, WebhookID{"a", "a.example.com"}, l.Webhook(WebhookID{"a", "a.example.com"}))

	require.Equal(t, []string{"resource", "webhook"}, folds)
	r, w := l.Folded()
	require.Equal(t, 2, r)
	require.Equal(t, 1, w)
}
