package cli

import (
	"errors"
	"fmt"
	"io"
	"strings"

	"k8s.io/cli-runtime/pkg/printers"

	sunsetv1 "github.com/kube-sunset/sunset/api/v1"
	"github.com/kube-sunset/sunset/catalog"
	"github.com/kube-sunset/sunset/internal/plural"
)

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
	format  outputFormat
	printer printers.ResourcePrinter
}

// Validate checks the flags and prepares the query.
func (l *ListRequest) Validate() error {
	var errs []error
	printer, err := objectPrinter(l.Output, l.NoHeaders)
	errs = append(errs, err)
	l.printer, l.format = printer, formatJSON
	if err == nil && printer == nil {
		l.format, err = parseFormat(l.Output)
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
	return l.printer != nil || l.format == formatJSON || l.format == formatYAML
}

func (l *ListRequest) writeObject(w io.Writer, obj any) error {
	if l.printer != nil {
		return printObject(w, l.printer, obj)
	}
	return encodeObject(w, obj, l.format)
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
		return describeAPI(out.Out, obj, out.Now(), o)
	}
	list, err := r.List(l.query)
	if err != nil {
		return err
	}
	rows := tableRows(list, o)
	if l.objects() {
		return l.writeObject(out.Out, keptAPIs(list, rows))
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
	return writeTable(out.Out, rows, o, l.format == formatWide)
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
func (l *ListRequest) filteredOut(r Reader, o reportOptions) string {
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
	n := len(tableRows(all, o))
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
