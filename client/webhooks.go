package client

import (
	"net/url"

	"github.com/kube-sunset/sunset/api"
)

// Webhooks reads the WebhookCountList.
func (c *Client) Webhooks(q api.WebhookQuery) (api.WebhookCountList, error) {
	var out api.WebhookCountList
	err := c.getJSON("/apis/sunset.dev/v1/webhookcounts", q.Values(), &out)
	return out, err
}

// Webhook reads one WebhookCount (configuration.webhook); api.ErrNotFound
// if the server has none.
func (c *Client) Webhook(name string, q api.WebhookQuery) (api.WebhookCount, error) {
	var out api.WebhookCount
	err := c.getJSON("/apis/sunset.dev/v1/webhookcounts/"+url.PathEscape(name), q.Values(), &out)
	return out, err
}
