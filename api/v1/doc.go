// Package v1 is the sunset.dev/v1 API as it goes over the wire, imported
// as sunsetv1: the objects the server answers with (APIRequestCount,
// FieldRequestCount, WebhookCount, UpgradeCheck, ServerInfo and the
// lists), the query parameters a read takes, and the values that are part
// of the contract (labels, states, severities, exit codes).
//
// It is apart from the server (package api) so that whatever only talks to
// the API, the client, the CLI and the page's tests, reads and writes
// these types without linking the query engine, the store or the Helm SDK;
// depguard (.golangci.yml) keeps its imports to the light packages the
// objects reach. The server's OpenAPI definitions are generated from these
// types and their doc comments (hack/openapi-gen), so a change to either
// needs `make generate`.
package v1
