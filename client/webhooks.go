package client

import (
	"net/url"

	"github.com/kube-sunset/sunset/api"
)

// Webhooks reads the WebhookCountList.
func (c *Client) Webhooks(q api.WebhookQuery) (api.WebhookCountList, error) {
	return get[api.WebhookCountList](c, "/apis/sunset.dev/v1/webhookcounts", q.Values())
}

// Webhook reads one WebhookCount (configuration.webhook); api.ErrNotFound
// if the server has none.
func (c *Client) Webhook(name string, q api.WebhookQuery) (api.WebhookCount, error) {
	return get[api.WebhookCount](c, "/apis/sunset.dev/v1/webhookcounts/"+url.PathEscape(name), q.Values())
}
