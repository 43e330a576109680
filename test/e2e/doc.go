// Package e2e runs Sunset as a cluster admin would: a real kube-apiserver
// and etcd, configured with the audit policy and webhook kubeconfig shipped
// in deploy/, send their audit webhook over HTTPS, with a token and a client
// certificate, to the built `sunset serve`. The apiserver also writes the
// same events to its audit log file, which gives the expected counts
// independently of Sunset. A second test runs admission webhooks served by
// the test itself (a slow mutating one, a validating one that fails open)
// and holds Sunset's webhook counts to the same audit log. A third has
// callers choose their own Audit-ID headers, one of 70,000 bytes and one
// shared by five requests, among ordinary traffic: Sunset answers every
// batch 2xx and counts one per request, as the audit log does.
//
// Run it with `make e2e`, which builds the peers (cached in .cache/bin) and
// the Sunset binary, and passes their paths in E2E_SUNSET_BIN,
// E2E_KUBE_APISERVER_BIN and E2E_ETCD_BIN.
package e2e
