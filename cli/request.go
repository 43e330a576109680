package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"k8s.io/cli-runtime/pkg/printers"

	"github.com/kube-sunset/sunset/admission"
	sunsetv1 "github.com/kube-sunset/sunset/api/v1"
	"github.com/kube-sunset/sunset/catalog"
	"github.com/kube-sunset/sunset/internal/plural"
	"github.com/kube-sunset/sunset/store"
	"github.com/kube-sunset/sunset/verdict"
)

// A Request is one read command: `sunset report`, `sunset check` or
// `sunset report webhooks`. Validate checks every flag at once, before any
// server or data directory is opened; Run reads and prints.
type Request interface {
	Validate() error
	Run(r Reader, out Output) error
}

// Reader reads what the API serves: a running server through its client,
// or a data directory through app's Parts. The commands read through it,
// so they print the same from either. It is declared here, where it is
// read, so that the CLI needs the API's types and not the server that
// implements it for a data directory.
type Reader interface {
	List(sunsetv1.Query) (sunsetv1.APIRequestCountList, error)
	Get(string, sunsetv1.Query) (sunsetv1.APIRequestCount, error)
	Info() (sunsetv1.ServerInfo, error)
	Webhooks(sunsetv1.WebhookQuery) (sunsetv1.WebhookCountList, error)
	Webhook(string, sunsetv1.WebhookQuery) (sunsetv1.WebhookCount, error)
}

// Output is where a request prints: its result to Out, notes and hints to
// Err. Now is the clock that ages what it shows.
type Output struct {
	Out, Err io.Writer
	Now      func() time.Time
}

// ExitCodeError ends a command with Code. What went wrong has been printed
// already.
type ExitCodeError struct {
	Code int
	Err  error
}

func (e *ExitCodeError) Error() string { return e.Err.Error() }
func (e *ExitCodeError) Unwrap() error { return e.Err }

// Filters are the flags report and check share.
type Filters struct {
	Cluster, User string
	Since         time.Duration
	ExcludeSystem bool
}

// validateSince accepts whole hours from 1h: counts are hourly, so a
// window of 90m would read as 2h and be named as neither.
func validateSince(since time.Duration) error { return validateHours("--since", since) }

// validateHours accepts whole hours from 1h for the duration flag named.
func validateHours(flag string, d time.Duration) error {
	switch {
	case d < time.Hour:
		return fmt.Errorf("%s %s is shorter than 1h; counts are hourly", flag, d)
	case d%time.Hour != 0:
		whole := d.Truncate(time.Hour)
		return fmt.Errorf("%s %s is not whole hours; counts are hourly (%s or %s)", flag, FormatDuration(d), FormatDuration(whole), FormatDuration(whole+time.Hour))
	}
	return nil
}

func (f Filters) query() sunsetv1.Query {
	q := sunsetv1.DefaultQuery()
	q.Cluster, q.User, q.Since = f.Cluster, f.User, f.Since
	// Enough users that the top non-system ones are known even when
	// system identities lead.
	q.Users = sunsetv1.MaxUsersToReport
	return q
}

func (f Filters) options() Options { return Options{ExcludeSystem: f.ExcludeSystem, Since: f.Since} }

// noRequests explains an empty window with what r holds within its
// retention, read through the same API with the same filters.
func (f Filters) noRequests(r Reader, q sunsetv1.Query, window sunsetv1.APIRequestCountList) (string, bool) {
	var retained *sunsetv1.APIRequestCountList
	var retention time.Duration
	// A server too old to describe itself gets no hint.
	if info, err := r.Info(); err == nil {
		if retention, err = time.ParseDuration(info.Retention); err == nil && retention > q.Since {
			q.Since = retention
			if list, err := r.List(q); err == nil {
				retained = &list
			}
		}
	}
	return NoRequests(window, retained, retention, f.options())
}

// ListRequest is `sunset report [NAME]`: the deprecated APIs requested in
// the window, or, given Name, that API's breakdown.
type ListRequest struct {
	Filters
	Name                     string
	Output                   string
	NoHeaders                bool
	RemovedIn, RemovedBefore string
	State                    string

	query   sunsetv1.Query
	format  Format
	printer printers.ResourcePrinter
}

// Validate checks the flags and prepares the query.
func (l *ListRequest) Validate() error {
	var errs []error
	printer, err := ObjectPrinter(l.Output, l.NoHeaders)
	errs = append(errs, err)
	l.printer, l.format = printer, FormatJSON
	if err == nil && printer == nil {
		l.format, err = ParseFormat(l.Output)
		errs = append(errs, err)
	}
	errs = append(errs, validateSince(l.Since))
	l.query = l.Filters.query()
	for _, release := range []struct {
		flag, value string
		dst         *catalog.Release
	}{{"--removed-in", l.RemovedIn, &l.query.RemovedIn}, {"--removed-before", l.RemovedBefore, &l.query.RemovedBefore}} {
		if release.value == "" {
			continue
		}
		if *release.dst, err = catalog.ParseRelease(release.value); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", release.flag, err))
		}
	}
	if l.State != "" && l.State != sunsetv1.StateDeprecated && l.State != sunsetv1.StateRemoved {
		errs = append(errs, fmt.Errorf("--state %q is not one of deprecated, removed", l.State))
	}
	l.query.State = l.State
	return errors.Join(errs...)
}

// objects reports whether the output is the API's objects rather than a
// table: json, yaml or one of kubectl's printers.
func (l *ListRequest) objects() bool {
	return l.printer != nil || l.format == FormatJSON || l.format == FormatYAML
}

func (l *ListRequest) writeObject(w io.Writer, obj any) error {
	if l.printer != nil {
		return PrintObject(w, l.printer, obj)
	}
	return WriteObject(w, obj, l.format)
}

// Run reads the list, or the one API, and prints it.
func (l *ListRequest) Run(r Reader, out Output) error {
	o := l.options()
	if l.Name != "" {
		obj, err := r.Get(l.Name, l.query)
		if errors.Is(err, sunsetv1.ErrNotFound) {
			return l.notFound(r)
		}
		if err != nil {
			return err
		}
		if l.objects() {
			return l.writeObject(out.Out, obj)
		}
		return Describe(out.Out, obj, out.Now(), o)
	}
	list, err := r.List(l.query)
	if err != nil {
		return err
	}
	rows := Rows(list, o)
	if l.objects() {
		return l.writeObject(out.Out, Kept(list, rows))
	}
	if len(rows) == 0 {
		msg, _ := l.noRequests(r, l.query, list)
		if filtered := l.filteredOut(r, o); filtered != "" {
			msg = filtered
		}
		fmt.Fprintln(out.Err, msg)
		return nil
	}
	o.NoHeaders = l.NoHeaders
	return WriteTable(out.Out, rows, o, l.format == FormatWide)
}

// notFound says why Name has nothing to show: --cluster left it out, or
// the name is not one recorded, with the recorded names it may mean.
func (l *ListRequest) notFound(r Reader) error {
	q := l.query
	q.Cluster = ""
	if l.Cluster != "" {
		if _, err := r.Get(l.Name, q); err == nil {
			return fmt.Errorf("no deprecated requests to %s were recorded in cluster %q; other clusters have some: leave out --cluster", l.Name, l.Cluster)
		}
	}
	msg := fmt.Sprintf("no deprecated requests to %s were recorded", l.Name)
	q.User, q.RemovedIn, q.RemovedBefore, q.State = "", catalog.Release{}, catalog.Release{}, ""
	var like []string
	if all, err := r.List(q); err == nil {
		for _, it := range all.Items {
			if name := it.Metadata.Name; strings.HasPrefix(name, l.Name+".") || strings.HasPrefix(l.Name, strings.SplitN(name, ".", 2)[0]+".") {
				like = append(like, name)
			}
		}
	}
	if len(like) > 0 {
		return fmt.Errorf("%s; recorded: %s", msg, strings.Join(like, ", "))
	}
	return fmt.Errorf("%s (names look like cronjobs.v1beta1.batch; `sunset report` lists them)", msg)
}

// filters are the list's filter flags that are set, as typed.
func (l *ListRequest) filters() []string {
	var set []string
	for _, f := range []struct{ flag, value string }{
		{"--cluster", l.Cluster}, {"--removed-in", l.RemovedIn}, {"--removed-before", l.RemovedBefore},
		{"--state", l.State}, {"--user", l.User},
	} {
		if f.value != "" {
			set = append(set, f.flag+" "+f.value)
		}
	}
	return set
}

// filteredOut says which filters emptied the window, when without them it
// would show APIs; "" when there are none, or none would be shown anyway.
//
//	No deprecated API requests in the last 24h match --state removed (6 APIs were requested; without that filter, `sunset report` shows them).
func (l *ListRequest) filteredOut(r Reader, o Options) string {
	set := l.filters()
	if len(set) == 0 {
		return ""
	}
	q := l.query
	q.Cluster, q.User, q.RemovedIn, q.RemovedBefore, q.State = "", "", catalog.Release{}, catalog.Release{}, ""
	all, err := r.List(q)
	if err != nil {
		return ""
	}
	n := len(Rows(all, o))
	if n == 0 {
		return ""
	}
	those, were, them := "that filter", "were", "them"
	if len(set) > 1 {
		those = "those filters"
	}
	if n == 1 {
		were, them = "was", "it"
	}
	return fmt.Sprintf("No deprecated API requests in the last %s match %s (%d API%s %s requested; without %s, `sunset report` shows %s).",
		FormatDuration(l.Since), strings.Join(set, ", "), n, plural.S(n), were, those, them)
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
	res := Check(list, CheckOptions{Target: c.target, Since: c.Since, ExcludeSystem: c.ExcludeSystem, WarningsAsErrors: c.WarningsAsErrors,
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
		err = WriteObject(out.Out, res, FormatJSON)
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

// WebhooksRequest is `sunset report webhooks [NAME]`: admission webhook
// counts, or one webhook's.
type WebhooksRequest struct {
	Name, Cluster, Class, Output string
	Since                        time.Duration

	query  sunsetv1.WebhookQuery
	format Format
}

// Validate checks the flags and prepares the query.
func (w *WebhooksRequest) Validate() error {
	format, err := ParseFormat(w.Output)
	errs := []error{err, validateSince(w.Since)}
	w.format, w.query = format, sunsetv1.WebhookQuery{Cluster: w.Cluster, Since: w.Since}
	if w.Class != "" {
		if w.query.Class, err = admission.ParseClass(w.Class); err != nil {
			errs = append(errs, fmt.Errorf("--%w", err))
		}
	}
	return errors.Join(errs...)
}

// Run reads the webhook counts and prints them.
func (w *WebhooksRequest) Run(r Reader, out Output) error {
	objects := w.format == FormatJSON || w.format == FormatYAML
	var list sunsetv1.WebhookCountList
	if w.Name != "" {
		obj, err := r.Webhook(w.Name, w.query)
		if errors.Is(err, sunsetv1.ErrNotFound) {
			return fmt.Errorf("no audit annotation named webhook %s in the last %s (names are configuration.webhook; `sunset report webhooks` lists them)", w.Name, FormatDuration(w.Since))
		}
		if err != nil {
			return err
		}
		if objects {
			return WriteObject(out.Out, obj, w.format)
		}
		list = sunsetv1.WebhookCountList{Items: []sunsetv1.WebhookCount{obj}, Resources: []sunsetv1.WebhookResourceCount{}}
	} else {
		var err error
		if list, err = r.Webhooks(w.query); err != nil {
			return err
		}
	}
	if objects {
		return WriteObject(out.Out, list, w.format)
	}
	if len(list.Items) == 0 && len(list.Resources) == 0 {
		fmt.Fprintln(out.Err, w.noAnnotations(r))
		return nil
	}
	return WriteWebhookTables(out.Out, list, w.format == FormatWide)
}

// noAnnotations says the window holds no webhook annotations, and, when
// --class or --cluster emptied it, which of them and what is there
// without it.
//
//	No admission webhook annotations on critical resources in the last 24h (3 webhooks were seen; without --class critical, `sunset report webhooks` shows them).
func (w *WebhooksRequest) noAnnotations(r Reader) string {
	on := ""
	if w.Class != "" {
		on = " on " + w.Class + " resources"
	}
	if w.Cluster != "" {
		on += fmt.Sprintf(" in cluster %q", w.Cluster)
	}
	msg := fmt.Sprintf("No admission webhook annotations%s in the last %s", on, FormatDuration(w.Since))
	if on == "" {
		return msg + "."
	}
	all, err := r.Webhooks(sunsetv1.WebhookQuery{Since: w.Since})
	if err != nil || len(all.Items) == 0 {
		return msg + "."
	}
	var set []string
	if w.Class != "" {
		set = append(set, "--class "+w.Class)
	}
	if w.Cluster != "" {
		set = append(set, "--cluster "+w.Cluster)
	}
	n := len(all.Items)
	were, them := "were", "them"
	if n == 1 {
		were, them = "was", "it"
	}
	return fmt.Sprintf("%s (%d webhook%s %s seen; without %s, `sunset report webhooks` shows %s).", msg, n, plural.S(n), were, strings.Join(set, " and "), them)
}

// Exit codes of `sunset store verify`.
const (
	ExitVerifyHealthy = 0
	ExitVerifyFailed  = 1
	ExitVerifyDamaged = 2
)

// Verify is `sunset store verify`: it checks dataDir (every block's
// checksum unless quick) and prints what it found. A failed or damaging
// verdict is an ExitCodeError.
func Verify(dataDir string, quick bool, out Output) error {
	r, err := store.Verify(dataDir, !quick)
	if err != nil {
		fmt.Fprintln(out.Err, "Error:", err)
		return &ExitCodeError{Code: ExitVerifyFailed, Err: err}
	}
	WriteVerify(out.Out, r)
	if !r.Healthy() {
		fmt.Fprintf(out.Err, "Error: %s is damaged; keep a copy of it and see \"Recovering a damaged store\" in docs/operations.md\n", dataDir)
		return &ExitCodeError{Code: ExitVerifyDamaged, Err: errors.New("damaged")}
	}
	return nil
}
