package connect

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"

	sunsetv1 "github.com/kube-sunset/sunset/api/v1"
	"github.com/kube-sunset/sunset/catalog"
	"github.com/kube-sunset/sunset/client"
)

// kubeReader reads Sunset through kube-apiserver, and turns the
// apiserver's answers for an API it does not serve into what to do.
type kubeReader struct {
	c *client.Client
	// where names the route: cluster "x" (context "y" in FILE).
	where string
}

func (k kubeReader) List(q sunsetv1.Query) (sunsetv1.APIRequestCountList, error) {
	l, err := k.c.List(q)
	return l, k.explain(err)
}

func (k kubeReader) Get(name string, q sunsetv1.Query) (sunsetv1.APIRequestCount, error) {
	o, err := k.c.Get(name, q)
	return o, k.explain(err)
}

func (k kubeReader) Info() (sunsetv1.ServerInfo, error) {
	i, err := k.c.Info()
	return i, k.explain(err)
}

func (k kubeReader) Webhooks(q sunsetv1.WebhookQuery) (sunsetv1.WebhookCountList, error) {
	l, err := k.c.Webhooks(q)
	return l, k.explain(err)
}

func (k kubeReader) Webhook(name string, q sunsetv1.WebhookQuery) (sunsetv1.WebhookCount, error) {
	o, err := k.c.Webhook(name, q)
	return o, k.explain(err)
}

// explain rewrites the errors whose cause is the route rather than
// Sunset. For a group no APIService serves, kube-apiserver answers 404
// with the text "404 page not found", where Sunset's own 404 (no counts
// for one API) is a Status the client reports as sunsetv1.ErrNotFound.
func (k kubeReader) explain(err error) error {
	var status *client.StatusError
	var transport *url.Error
	switch {
	case errors.As(err, &status) && status.Code == http.StatusNotFound:
		return fmt.Errorf("%s does not serve sunset.dev/v1: install Sunset's APIService there (docs/install.md), choose another context with --context, or read a Sunset directly with --server URL", k.where)
	case errors.As(err, &status) && status.Code == http.StatusServiceUnavailable:
		return fmt.Errorf("%s: %w (`kubectl get apiservice v1.sunset.dev` says why Sunset is not available)", k.where, err)
	case errors.As(err, &transport):
		return fmt.Errorf("cannot reach kube-apiserver of %s: %w", k.where, transport)
	}
	return err
}

func (k kubeReader) CheckExemptions(target catalog.Release) ([]sunsetv1.Exemption, error) {
	e, err := k.c.CheckExemptions(target)
	return e, k.explain(err)
}
