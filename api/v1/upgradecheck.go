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
	// Callers are the same users, each with when it last called and
	// whether it counts against the verdict.
	Callers []Caller `json:"callers,omitempty"`
	// Accepted is true when the API was removed by the target but every
	// caller has stopped or is exempted, so that it does not make the
	// verdict NOT SAFE; Severity stays.
	Accepted bool `json:"accepted,omitempty"`
}

// Caller is one user of an API in the window.
type Caller struct {
	UserName   string   `json:"username"`
	UserAgents []string `json:"userAgents"`
	// LastSeen is the start of the last hour with requests; zero when
	// the data does not say.
	LastSeen time.Time `json:"lastSeen,omitzero"`
	// Stopped: its last hour ended at least cleanFor before the check,
	// so it is treated as fixed.
	Stopped bool `json:"stopped,omitempty"`
	// Exemption is the unexpired exemption that accepts its calls.
	Exemption *Exemption `json:"exemption,omitempty"`
}

// Exemption accepts calls to an API until it expires: by one user, one
// user agent, or both; with neither, every call to the API. A user agent
// ending in * matches a prefix.
type Exemption struct {
	// API is the APIRequestCount name, e.g. cronjobs.v1beta1.batch.
	API       string `json:"api"`
	UserName  string `json:"user,omitempty"`
	UserAgent string `json:"userAgent,omitempty"`
	Reason    string `json:"reason"`
	// Expires is when it stops applying: from then on the calls count.
	Expires time.Time `json:"expires"`
}

// Step is the verdict at one release of an upgrade across several minors.
type Step struct {
	Release  string   `json:"release"`
	ExitCode ExitCode `json:"exitCode"`
	// Findings name the APIs that this release removes and that were
	// requested, by callers neither stopped nor exempted.
	Findings []string `json:"findings"`
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
	// CleanFor is how long a caller must have been silent to count as
	// stopped; empty when callers never do.
	CleanFor string `json:"cleanFor,omitempty"`
	// StoppedCallers counts the callers of findings treated as stopped.
	StoppedCallers int `json:"stoppedCallers,omitempty"`
	// Exemptions are those in force at the check; StaleExemptions those
	// of them that matched no call in the window, and ExpiredExemptions
	// those whose time has passed.
	Exemptions        []Exemption `json:"exemptions,omitempty"`
	StaleExemptions   []Exemption `json:"staleExemptions,omitempty"`
	ExpiredExemptions []Exemption `json:"expiredExemptions,omitempty"`
	// From is the release upgraded from, for an upgrade across several
	// minors; Steps are then the releases in (from, target] at which
	// something requested breaks, and FirstBreaking the first of them.
	From          string `json:"from,omitempty"`
	Steps         []Step `json:"steps,omitempty"`
	FirstBreaking string `json:"firstBreaking,omitempty"`
	// GateOverrides are the upgrades of the cluster (of every cluster
	// without one) that the upgrade gate let through in the window
	// because the object carried sunset.dev/upgrade-override, newest
	// first.
	GateOverrides []GateOverride `json:"gateOverrides,omitempty"`
	// Scan is what a scan of manifests, charts or the cluster found
	// (`sunset check --scan`, or the server's cluster scan), judged at
	// the same target, and ScanVerdict its sentence; ExitCode covers both.
	Scan        *report.Result `json:"scan,omitempty"`
	ScanVerdict string         `json:"scanVerdict,omitempty"`
}
