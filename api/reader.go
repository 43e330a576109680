package api

// Reader reads what the API serves: a running server through its client,
// or a data directory through Service and WebhookService. The commands
// read through it, so they print the same from either.
type Reader interface {
	List(Query) (APIRequestCountList, error)
	Get(string, Query) (APIRequestCount, error)
	Info() (ServerInfo, error)
	Webhooks(WebhookQuery) (WebhookCountList, error)
	Webhook(string, WebhookQuery) (WebhookCount, error)
}
