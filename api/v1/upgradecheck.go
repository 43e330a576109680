package v1

import (
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kube-sunset/sunset/catalog"
	"github.com/kube-sunset/sunset/scan/report"
)

// UpgradeCheck is the upgrade gate's verdict for one target release, as
// `sunset check` gives it: its name is the release, its status what
// `sunset check -o json` prints for the same window, cluster and options.
type UpgradeCheck struct {
	metav1.TypeMeta `json:",inline"`
	Metadata        metav1.ObjectMeta `json:"metadata"`
	Status          CheckResult       `json:"status"`
}

// UpgradeCheckList holds an UpgradeCheck for every release in which an API
// is removed, by the catalog or by what the apiservers announced, and in
// which kube-apiserver starts refusing a flagged webhook server's
// certificate, oldest first: the releases where the verdict can change.
type UpgradeCheckList struct {
	metav1.TypeMeta `json:",inline"`
	Metadata        metav1.ListMeta `json:"metadata"`
	Items           []UpgradeCheck  `json:"items"`
}

// DefaultCheckSince is the window of an upgrade check without ?since=, as
// `sunset check`'s.
const DefaultCheckSince = 24 * time.Hour

// ExitCode is an upgrade check's verdict as a number, status.exitCode: the
// same for an UpgradeCheck as for `sunset check -o json`. Its values are
// part of the wire format. They are also the exit codes `sunset check`
// exits with, which package cli names, so that a script reads the same
// number from the JSON as from $?; a test in cli holds the two together.
type ExitCode int

// The values of ExitCode.
const (
	// ExitCodeSafe: nothing removed at or before the target was requested
	// or found.
	ExitCodeSafe ExitCode = 0
	// ExitCodeError: a scan joined to the check could not read an input,
	// so "safe" would be a guess.
	ExitCodeError ExitCode = 1
	// ExitCodeDeprecated: only deprecated, not yet removed, APIs were
	// requested or found, and warnings count as errors.
	ExitCodeDeprecated ExitCode = 2
	// ExitCodeRemoved: APIs removed at or before the target were requested
	// or found, or the target's kube-apiserver refuses a webhook server's
	// certificate.
	ExitCodeRemoved ExitCode = 3
)

// Severity of a finding.
const (
	SeverityRemoved    = catalog.StateRemoved
	SeverityDeprecated = catalog.StateDeprecated
	// SeverityRefused: the target's kube-apiserver refuses a webhook
	// server's certificate whatever its settings.
	SeverityRefused = "refused"
)

// Finding is one API that was requested in the window.
type Finding struct {
	Name     string `json:"name"`
	Severity string `json:"severity"`
	// RemovedIn is the release that removes the API, if known.
	RemovedIn string `json:"removedInRelease,omitempty"`
	// AlreadyRemoved is true when clients already got 404s from it.
	AlreadyRemoved bool   `json:"alreadyRemoved,omitempty"`
	Warning        string `json:"warning"`
	Requests       int64  `json:"requests"`
	ClientCount    int    `json:"clientCount"`
	// Clients are the top usernames, most requests first.
	Clients []string `json:"clients"`
}

// CertificateFinding is a webhook server whose certificate kube-apiserver
// flagged in the window. The target refuses it (SeverityRefused), or
// accepts it only while GODEBUG says so, or not yet by default
// (SeverityDeprecated). System users are not left out: a webhook fails
// for every caller alike.
type CertificateFinding struct {
	Cluster  string `json:"cluster"`
	Host     string `json:"host"`
	Problem  string `json:"problem"`
	Severity string `json:"severity"`
	// RefusedIn is the first release that refuses it whatever its
	// settings.
	RefusedIn string `json:"refusedInRelease"`
	// Warning says what is wrong and from which releases it is refused.
	Warning  string `json:"warning"`
	Requests int64  `json:"requests"`
	// Resources are those requested, most requests first.
	Resources []string `json:"resources"`
}

// CheckResult is the verdict of the upgrade gate.
type CheckResult struct {
	TargetVersion string    `json:"targetVersion"`
	Since         string    `json:"since"`
	ExcludeSystem bool      `json:"excludeSystem"`
	ExitCode      ExitCode  `json:"exitCode"`
	Findings      []Finding `json:"findings"`
	// WebhookCertificates are the webhook servers whose certificate
	// kube-apiserver flagged, refused first; left out when none was.
	WebhookCertificates []CertificateFinding `json:"webhookCertificates,omitempty"`
	// Message is the verdict in one sentence, as `sunset check` ends.
	Message string `json:"message"`
	// Scan is what a scan of manifests, charts or the cluster found
	// (`sunset check --scan`, or the server's cluster scan), judged at
	// the same target, and ScanVerdict its sentence; ExitCode covers both.
	Scan        *report.Result `json:"scan,omitempty"`
	ScanVerdict string         `json:"scanVerdict,omitempty"`
}
