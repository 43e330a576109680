package admission

import (
	"encoding/json"
	"slices"
	"strings"
	"unicode/utf8"
)

// Webhook serving certificates that kube-apiserver flags.
//
// kube-apiserver wraps the HTTP client of admission and conversion webhooks
// (k8s.io/apiserver/pkg/util/webhook, client.go and webhook.go) in
// x509metrics.NewDeprecatedCertificateRoundTripperWrapperConstructor
// (k8s.io/apiserver/pkg/util/x509metrics/server_cert_deprecations.go, the
// same in v0.36.3 and v0.37.2). When a call's TLS handshake fails
// because of the certificate, or succeeds with a certificate that a
// GODEBUG override let through, it adds one audit annotation to the
// request that made the call:
//
//	insecure-sha1.invalid-cert.kubernetes.io/<host>  "uses an insecure SHA-1 signature"
//	missing-san.invalid-cert.kubernetes.io/<host>    "relies on a legacy Common Name field instead of the SAN extension for subject validation"
//
// <host> is the host of the URL called (req.URL.Hostname()): the webhook's
// Service as name.namespace.svc, or its clientConfig.url host. It names
// the server, not the webhook: several webhooks may share a server, and
// the key is the same for every call of a request to it.
//
// The error path still works on kube-apiserver v1.36 (built with Go 1.26):
// crypto/x509 reports a SHA-1-signed leaf as an UnknownAuthorityError
// whose hint is "x509: cannot verify signature: insecure algorithm
// SHA1-RSA", and a leaf without subjectAltName whose Common Name matches
// the host as a HostnameError "x509: certificate relies on legacy Common
// Name field, use SANs instead", which are the errors the checkers look
// for. A SHA-1-signed certificate that is self-signed, or a leaf without
// SAN whose Common Name does not match the host, fails without the
// annotation.

// CertificateProblem is what kube-apiserver flagged about a webhook
// server's certificate: the id that starts its annotation key.
type CertificateProblem string

// The problems kube-apiserver flags.
const (
	InsecureSHA1 CertificateProblem = "insecure-sha1"
	MissingSAN   CertificateProblem = "missing-san"
)

// certificateKeySuffix follows the problem's id in the annotation key.
const certificateKeySuffix = ".invalid-cert.kubernetes.io/"

// Annotation key prefixes of the certificate problems.
const (
	InsecureSHA1Prefix = string(InsecureSHA1) + certificateKeySuffix
	MissingSANPrefix   = string(MissingSAN) + certificateKeySuffix
)

// MaxHostsPerRequest bounds the servers one event may name: a request
// calls far fewer webhook servers.
const MaxHostsPerRequest = 64

// CertificateRule is what each Kubernetes release does with a certificate
// that has the problem. Releases are "major.minor".
//
// Sources: Go's release notes and doc/godebug.md for the Go side;
// Kubernetes release notes for the Go version each release is built with.
//
//   - missing-san: Go 1.15 stopped using the Common Name as a host name
//     when a certificate has no SAN, unless GODEBUG=x509ignoreCN=0
//     (go.dev/doc/go1.15#commonname); Kubernetes 1.19 is built with Go
//     1.15 (kubernetes#93264). Go 1.17 removed the setting
//     (go.dev/doc/go1.17#crypto/x509); Kubernetes 1.23 is built with Go
//     1.17 (kubernetes#103692).
//   - insecure-sha1: Go 1.18 rejects SHA-1 signatures unless
//     GODEBUG=x509sha1=1 (go.dev/doc/go1.18#sha1); Kubernetes 1.24 is built
//     with Go 1.18 (kubernetes#109024, which added the metric and
//     annotation). Go 1.24 removed the setting (doc/godebug.md, "Go 1.24
//     removed the x509sha1 setting"; kubernetes#125689); Kubernetes 1.33
//     is built with Go 1.24. The 1.32 branch moved to Go 1.24.12 in
//     January 2026 (kubernetes#136469), so 1.32 patch releases cut after
//     it refuse them too.
type CertificateRule struct {
	Problem CertificateProblem
	// Reason is kube-apiserver's annotation value.
	Reason string
	// DefaultRefusedIn is the first release that refuses the certificate
	// unless GODEBUG says otherwise.
	DefaultRefusedIn string
	GODEBUG          string
	// RefusedIn is the first release that refuses it whatever its
	// settings.
	RefusedIn string
}

// CertificateRules are the problems kube-apiserver flags, with what each
// release does about them.
var CertificateRules = []CertificateRule{
	{Problem: InsecureSHA1, Reason: "uses an insecure SHA-1 signature", DefaultRefusedIn: "1.24", GODEBUG: "x509sha1=1", RefusedIn: "1.33"},
	{Problem: MissingSAN, Reason: "relies on a legacy Common Name field instead of the SAN extension for subject validation",
		DefaultRefusedIn: "1.19", GODEBUG: "x509ignoreCN=0", RefusedIn: "1.23"},
}

// RuleOf returns the rule of a problem, and false for a value that is not
// one.
func RuleOf(p CertificateProblem) (CertificateRule, bool) {
	for _, r := range CertificateRules {
		if r.Problem == p {
			return r, true
		}
	}
	return CertificateRule{}, false
}

// CertificateIssue is one webhook server whose certificate kube-apiserver
// flagged on a request.
type CertificateIssue struct {
	Problem CertificateProblem
	Host    string
}

// certificateIssue reads one annotation: ok is false for a key that is not
// a certificate annotation; valid is false for one that kube-apiserver
// would not write.
func certificateIssue(key string, raw json.RawMessage) (issue CertificateIssue, ok, valid bool) {
	var problem CertificateProblem
	var host string
	switch {
	case strings.HasPrefix(key, InsecureSHA1Prefix):
		problem, host = InsecureSHA1, key[len(InsecureSHA1Prefix):]
	case strings.HasPrefix(key, MissingSANPrefix):
		problem, host = MissingSAN, key[len(MissingSANPrefix):]
	default:
		return CertificateIssue{}, false, false
	}
	// The value is a sentence; only its being a string is checked, so a
	// reworded reason in a later release still counts.
	var reason string
	if json.Unmarshal(raw, &reason) != nil || !validHost(host) {
		return CertificateIssue{}, true, false
	}
	return CertificateIssue{Problem: problem, Host: host}, true, true
}

// validHost accepts what url.URL.Hostname can return for a webhook: a DNS
// name or an IP address (IPv6 without brackets, maybe with a zone), and
// nothing that could not be printed as it is.
func validHost(h string) bool {
	if h == "" || len(h) > MaxNameBytes || !utf8.ValidString(h) {
		return false
	}
	for _, r := range h {
		if r <= ' ' || r == 0x7f || r == '/' || (r >= 0x80 && r <= 0x9f) {
			return false
		}
	}
	return true
}

func sortIssues(issues []CertificateIssue) {
	slices.SortFunc(issues, func(a, b CertificateIssue) int {
		if a.Host != b.Host {
			return strings.Compare(a.Host, b.Host)
		}
		return strings.Compare(string(a.Problem), string(b.Problem))
	})
}
