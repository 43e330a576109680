package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	sunsetv1 "github.com/kube-sunset/sunset/api/v1"
	"github.com/kube-sunset/sunset/catalog"
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

// CheckResult is the verdict of the upgrade gate. The logic is package
// verdict's, so `sunset check` and the upgradechecks endpoint agree; its
// JSON is sunsetv1.CheckResult's.
type CheckResult struct{ sunsetv1.CheckResult }

// checkVerdict decides whether upgrading to the target is safe from what list says
// was requested. list must have been read with Since set, so each item has
// a window.
func checkVerdict(list sunsetv1.APIRequestCountList, o verdict.CheckOptions) CheckResult {
	return CheckResult{verdict.Check(list, o)}
}

// acceptedWhy says why an accepted finding does not count: each caller
// stopped or exempted, and until when.
func acceptedWhy(f sunsetv1.Finding) string {
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

// CheckRequest is `sunset check`: the upgrade gate.
type CheckRequest struct {
	Filters
	TargetVersion    string
	Output           string
	WarningsAsErrors bool
	// Scan adds what is about to be applied (paths, a cluster) to the
	// traffic, for one verdict over both.
	Scan ScanOptions
	// CleanFor treats callers silent for at least this long as stopped
	// (--clean-for); whole hours.
	CleanFor time.Duration
	// From is the release upgraded from (--from): the verdict then names
	// each release on the way that breaks.
	From string
	// Exemptions accept calls until they expire; nil takes the source's
	// (the server's, or --config's with --data-dir).
	Exemptions []sunsetv1.Exemption

	target, from catalog.Release
}

// Validate checks the flags.
func (c *CheckRequest) Validate() error {
	var errs []error
	if c.TargetVersion == "" {
		errs = append(errs, errors.New("--target-version is required, e.g. --target-version 1.37"))
	} else if rel, err := parseTarget(c.TargetVersion); err != nil {
		errs = append(errs, err)
	} else {
		c.target = rel
	}
	errs = append(errs, validateSince(c.Since), c.Scan.validate())
	if c.CleanFor != 0 {
		errs = append(errs, validateHours("--clean-for", c.CleanFor))
	}
	if c.From != "" {
		from, err := catalog.ParseRelease(c.From)
		switch {
		case err != nil:
			errs = append(errs, fmt.Errorf("--from: %w", err))
		case !c.target.IsZero() && !from.Less(c.target):
			errs = append(errs, fmt.Errorf("--from %s is not before --target-version %s", from, c.target))
		}
		c.from = from
	}
	if c.Output != "text" && c.Output != "json" {
		errs = append(errs, fmt.Errorf("-o %q is not one of text, json", c.Output))
	}
	return errors.Join(errs...)
}

// Run reads the window and prints the verdict; an unsafe verdict is an
// ExitCodeError with the check's exit code.
func (c *CheckRequest) Run(r Reader, out Output) error {
	q := c.query()
	list, err := r.List(q)
	if err != nil {
		return err
	}
	// Webhook servers whose certificate the apiservers flagged block an
	// upgrade as removed APIs do.
	webhooks, err := r.Webhooks(sunsetv1.WebhookQuery{Cluster: c.Cluster, Since: c.Since})
	if err != nil {
		return err
	}
	exemptions := c.Exemptions
	if er, ok := r.(exemptionsReader); ok && exemptions == nil {
		if exemptions, err = er.CheckExemptions(c.target); err != nil {
			return err
		}
	}
	res := checkVerdict(list, verdict.CheckOptions{Target: c.target, Since: c.Since, ExcludeSystem: c.ExcludeSystem, WarningsAsErrors: c.WarningsAsErrors,
		WebhookCertificates: webhooks.Certificates, Now: c.now(r, out), CleanFor: c.CleanFor, Exemptions: exemptions, From: c.from})
	if len(res.Findings) == 0 {
		// Safe, but say so when the window misses what the store holds.
		if msg, hinted := c.noRequests(r, q, list); hinted {
			fmt.Fprintln(out.Err, msg)
		}
	}
	if c.Scan.wanted() {
		if err := c.addScan(&res); err != nil {
			return err
		}
	}
	if c.Output == "json" {
		err = encodeObject(out.Out, res, formatJSON)
	} else {
		err = c.writeText(out, res)
	}
	if err != nil {
		return err
	}
	if code := exitCode(res.ExitCode); code != ExitSafe {
		return &ExitCodeError{Code: code, Err: fmt.Errorf("check failed with exit code %d", code)}
	}
	return nil
}

// exemptionsReader is a source with exemptions of its own: a server's
// (through its upgrade check) or a data directory's config.
type exemptionsReader interface {
	CheckExemptions(target catalog.Release) ([]sunsetv1.Exemption, error)
}

// now is the time the check is judged at: the source's clock, which the
// window was read against, else this machine's.
func (c *CheckRequest) now(r Reader, out Output) time.Time {
	if info, err := r.Info(); err == nil && !info.Time.IsZero() {
		return info.Time
	}
	if out.Now != nil {
		return out.Now()
	}
	return time.Time{}
}

// addScan scans and joins the verdicts, as the server's upgrade checks do.
func (c *CheckRequest) addScan(res *CheckResult) error {
	sres, err := c.Scan.run(context.Background(), c.target)
	if err != nil {
		return err
	}
	verdict.JoinScan(&res.CheckResult, sres, c.WarningsAsErrors)
	return nil
}

// writeText writes the traffic's warnings, then the scan's findings, then
// both verdicts.
func (c *CheckRequest) writeText(out Output, res CheckResult) error {
	if res.Scan == nil {
		return res.WriteText(out.Out)
	}
	if err := res.WriteText(out.Out); err != nil {
		return err
	}
	if len(res.Scan.Findings) > 0 {
		if err := res.Scan.Write(out.Out, "table", "", Terminal); err != nil {
			return err
		}
	}
	writeScanProblems(out.Err, *res.Scan)
	_, err := fmt.Fprintln(out.Out, Terminal(res.ScanVerdict))
	return err
}
