package client

import (
	"net/url"

	sunsetv1 "github.com/kube-sunset/sunset/api/v1"
)

// Webhooks reads the WebhookCountList.
func (c *Client) Webhooks(q sunsetv1.WebhookQuery) (sunsetv1.WebhookCountList, error) {
	return get[sunsetv1.WebhookCountList](c, "/apis/sunset.dev/v1/webhookcounts", q.Values())
}

// Webhook reads one WebhookCount (configuration.webhook);
// sunsetv1.ErrNotFound if the server has none.
func (c *Client) Webhook(name string, q sunsetv1.WebhookQuery) (sunsetv1.WebhookCount, error) {
	return get[sunsetv1.WebhookCount](c, "/apis/sunset.dev/v1/webhookcounts/"+url.PathEscape(name), q.Values())
}
