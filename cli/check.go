package cli

import (
	"fmt"
	"io"
	"strings"
	"time"

	sunsetv1 "github.com/kube-sunset/sunset/api/v1"
	"github.com/kube-sunset/sunset/internal/plural"
	"github.com/kube-sunset/sunset/verdict"
)

// The process's exit codes. Every command exits ExitSafe when it succeeds
// and ExitError when it fails; `sunset check` and `sunset scan` exit with
// their verdict. The numbers are the CLI's to keep, but an UpgradeCheck
// carries the verdict's on the wire too (sunsetv1.ExitCode), so that a
// script reads the same number from -o json as from $?: exitCode maps one
// to the other, and its test holds them equal.
const (
	// ExitSafe: the command succeeded; for a verdict, nothing removed at
	// or before the target was requested or found.
	ExitSafe = 0
	// ExitError: the command failed (usage, connection, data), or a scan
	// could not read an input, so "safe" would be a guess.
	ExitError = 1
	// ExitDeprecated: only deprecated, not yet removed, APIs were requested
	// or found, and warnings count as errors.
	ExitDeprecated = 2
	// ExitRemoved: APIs removed at or before the target were requested or
	// found, or the target's kube-apiserver refuses a webhook server's
	// certificate.
	ExitRemoved = 3
)

// exitCode is the process's exit code for a verdict's exit code on the
// wire: the same number, which both sides promise.
func exitCode(c sunsetv1.ExitCode) int { return int(c) }

// Severity of a finding.
const (
	SeverityRemoved    = sunsetv1.SeverityRemoved
	SeverityDeprecated = sunsetv1.SeverityDeprecated
)

// CheckOptions configure Check.
type CheckOptions = verdict.CheckOptions

// Finding is one API that was requested in the window.
type Finding = sunsetv1.Finding

// CheckResult is the verdict of the upgrade gate. The logic is package
// verdict's, so `sunset check` and the upgradechecks endpoint agree; its
// JSON is sunsetv1.CheckResult's.
type CheckResult struct{ sunsetv1.CheckResult }

// Check decides whether upgrading to the target is safe from what list says
// was requested. list must have been read with Since set, so each item has
// a window.
func Check(list sunsetv1.APIRequestCountList, o CheckOptions) CheckResult {
	return CheckResult{verdict.Check(list, o)}
}

// acceptedWhy says why an accepted finding does not count: each caller
// stopped or exempted, and until when.
func acceptedWhy(f Finding) string {
	var parts []string
	for _, c := range f.Callers {
		switch {
		case c.Exemption != nil:
			parts = append(parts, fmt.Sprintf("%s exempted until %s (%s)", Terminal(c.UserName), c.Exemption.Expires.UTC().Format(time.RFC3339), Terminal(c.Exemption.Reason)))
		case c.Stopped:
			parts = append(parts, fmt.Sprintf("%s silent since %s", Terminal(c.UserName), c.LastSeen.UTC().Add(time.Hour).Format(time.RFC3339)))
		}
	}
	if len(parts) == 0 || len(parts) < f.ClientCount {
		parts = append(parts, "exempted for every caller")
	}
	return strings.Join(parts, "; ")
}

// maxNamedClients is how many clients a warning line names.
const maxNamedClients = 3

// WriteText writes one line per finding in the Kubernetes warning format,
// removed APIs first, then the webhook servers whose certificate
// kube-apiserver flagged, then the verdict. The API names, clients and
// hosts in it come from audit data and are escaped for the terminal.
func (r CheckResult) WriteText(w io.Writer) error {
	for _, f := range r.Findings {
		clients := f.Clients
		more := ""
		if len(clients) > maxNamedClients || f.ClientCount > len(clients) {
			if len(clients) > maxNamedClients {
				clients = clients[:maxNamedClients]
			}
			more = ", ..."
		}
		already := ""
		if f.AlreadyRemoved {
			already = " [already removed: clients get 404]"
		}
		if f.Accepted {
			already += " [not counted: " + acceptedWhy(f) + "]"
		}
		named := make([]string, len(clients))
		for i, c := range clients {
			named[i] = Terminal(c)
		}
		if _, err := fmt.Fprintf(w, "Warning: %s (%d request%s in %s by %d client%s: %s%s)%s\n",
			Terminal(f.Warning), f.Requests, plural.S(int(f.Requests)), r.Since, f.ClientCount, plural.S(f.ClientCount), strings.Join(named, ", "), more, already); err != nil {
			return err
		}
	}
	if err := writeCertificateWarnings(w, r.CheckResult); err != nil {
		return err
	}
	_, err := fmt.Fprintln(w, Terminal(r.Message))
	return err
}
