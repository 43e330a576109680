// Package replay imports audit log files into a data directory or a
// running server, or tells what they would count (a dry run), and sums up
// what it did. It is what `sunset replay` runs.
package replay

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/rs/zerolog"

	"github.com/kube-sunset/sunset/aggregate"
	"github.com/kube-sunset/sunset/classify"
	"github.com/kube-sunset/sunset/cli"
	"github.com/kube-sunset/sunset/cli/connect"
	"github.com/kube-sunset/sunset/client"
	"github.com/kube-sunset/sunset/config"
	"github.com/kube-sunset/sunset/ingest/auditjson"
	"github.com/kube-sunset/sunset/ingest/file"
	"github.com/kube-sunset/sunset/ingest/webhook"
	"github.com/kube-sunset/sunset/internal/plural"
	"github.com/kube-sunset/sunset/parts"
)

// Values of --dry-run, as kubectl's.
const (
	DryRunNone   = "none"
	DryRunClient = "client"
	DryRunServer = "server"
)

// Options say what to replay and where.
type Options struct {
	// Inputs are files, directories, or - for Stdin.
	Inputs []string
	// Source names the server (Server and its credentials) or the data
	// directory, and the config file; neither means the config's data
	// directory.
	Source        connect.Flags
	Cluster, Node string
	// DryRun is DryRunNone, DryRunClient or DryRunServer.
	DryRun string
	// ShiftToNow moves every timestamp by whole hours so that the newest
	// event falls in the current hour.
	ShiftToNow bool

	Stdin          io.Reader
	Stdout, Stderr io.Writer
	// Terminal is whether Stderr is a terminal, for the progress line.
	Terminal bool
	Now      func() time.Time
}

// Run replays the inputs: the summary goes to Stderr, and a dry run's
// table to Stdout.
func Run(ctx context.Context, o Options) error {
	switch o.DryRun {
	case DryRunNone, DryRunClient, DryRunServer:
	default:
		return fmt.Errorf("--dry-run %q is not one of none, client, server", o.DryRun)
	}
	if o.DryRun == DryRunServer && o.Source.Server == "" {
		return errors.New("--dry-run=server needs --server")
	}
	if o.Source.Server != "" && o.Source.DataDir != "" {
		return errors.New("give either --server or --data-dir, not both")
	}
	inputs, err := file.Expand(o.Inputs)
	if err != nil {
		return err
	}
	cfg, err := o.Source.Config()
	if err != nil {
		return err
	}
	stdin := o.Stdin
	var shift time.Duration
	if o.ShiftToNow {
		open, cleanup, err := file.SpoolStdin(inputs, o.Stdin)
		if err != nil {
			return err
		}
		defer cleanup()
		newest, err := readNewest(ctx, o, inputs, open)
		if err != nil {
			return err
		}
		shift = file.ShiftToHour(newest, o.Now())
		writeShift(o.Stderr, newest, shift)
		r, err := open()
		if err != nil {
			return err
		}
		defer func() { _ = r.Close() }()
		stdin = r
	}
	origin := classify.Origin{Source: "file", Cluster: o.Cluster, Node: o.Node}
	sink, opts, done, err := newSink(o, cfg, origin)
	if err != nil {
		return err
	}
	if shift != 0 {
		sink = file.Shifted{Sink: sink, By: shift}
	}
	prog := newProgress(inputs)
	stopProgress := showProgress(o, prog)
	sum, err := file.Replay(ctx, inputs, stdin, sink, prog, opts)
	stopProgress()
	if derr := done(); err == nil {
		err = derr
	}
	if p, ok := sink.(*planSink); ok {
		if werr := p.write(o.Stdout); werr != nil && err == nil {
			err = werr
		}
	}
	writeSummary(o.Stderr, sum, o.DryRun, err != nil)
	return err
}

func newProgress(inputs []file.Input) *file.Progress {
	prog := &file.Progress{}
	for _, in := range inputs {
		prog.TotalBytes += in.Size
	}
	return prog
}

// readNewest is the first of the two reads of --shift-to-now.
func readNewest(ctx context.Context, o Options, inputs []file.Input, open func() (io.ReadCloser, error)) (time.Time, error) {
	r, err := open()
	if err != nil {
		return time.Time{}, err
	}
	defer func() { _ = r.Close() }()
	prog := newProgress(inputs)
	stopProgress := showProgress(o, prog)
	defer stopProgress()
	return file.Newest(ctx, inputs, r, prog)
}

// writeShift says what --shift-to-now did, before the summary.
func writeShift(w io.Writer, newest time.Time, by time.Duration) {
	at := newest.UTC().Format("2006-01-02 15:04:05 UTC")
	switch {
	case newest.IsZero():
		fmt.Fprintln(w, "No event has a timestamp: nothing to shift.")
	case by == 0:
		fmt.Fprintf(w, "The newest event (%s) is in the current hour already: timestamps unchanged.\n", at)
	case by > 0:
		fmt.Fprintf(w, "Shifted every timestamp %s later, so the newest event (%s) falls in the current hour.\n", cli.FormatDuration(by), at)
	default:
		fmt.Fprintf(w, "Shifted every timestamp %s earlier, so the newest event (%s) falls in the current hour.\n", cli.FormatDuration(-by), at)
	}
}

// newSink builds where events go, and a function that releases it.
// newSink is where the replay's events go, with the options that fit it:
// the local aggregator's pre-filter, and how many batches it or a server
// takes at once.
func newSink(o Options, cfg config.Config, origin classify.Origin) (file.Sink, file.ReplayOptions, func() error, error) {
	noop := func() error { return nil }
	if o.Source.Server != "" {
		c, err := o.Source.Client()
		if err != nil {
			return nil, file.ReplayOptions{}, nil, err
		}
		path := "/audit/webhook/" + url.PathEscape(origin.Cluster) + "/" + url.PathEscape(origin.Node)
		if o.DryRun == DryRunServer {
			return &planSink{server: c, path: path}, file.ReplayOptions{}, noop, nil
		}
		// A few batches at once, as kube-apiserver's webhook posts.
		return &serverSink{c: c, path: path}, file.ReplayOptions{InFlight: 4}, noop, nil
	}
	parts, err := parts.Open(cfg, parts.Options{DataDir: o.Source.DataDir, NoStore: o.DryRun == DryRunClient,
		Logger: zerolog.Nop(), Now: o.Now,
		Hint: o.Source.LockHint("replay through it", cfg)})
	if err != nil {
		return nil, file.ReplayOptions{}, nil, err
	}
	agg := parts.Aggregator(aggregate.Options{Logger: zerolog.Nop()})
	if o.DryRun == DryRunClient {
		return &planSink{local: agg, origin: origin}, file.ReplayOptions{}, noop, nil
	}
	runCtx, stop := context.WithCancel(context.Background())
	stopped := make(chan struct{})
	go func() { agg.Run(runCtx); close(stopped) }()
	done := func() error {
		stop()
		<-stopped
		return parts.Close()
	}
	// Lines that cannot count are set aside undecoded, and several
	// batches commit at once: the aggregator merges them into one
	// transaction and one fsync.
	opts := file.ReplayOptions{Prefilter: auditjson.NewPrefilter(agg.Interest()), InFlight: 8}
	return &aggregatorSink{agg: agg, origin: origin}, opts, done, nil
}

// aggregatorSink counts into a local data directory.
type aggregatorSink struct {
	agg    *aggregate.Aggregator
	origin classify.Origin
}

func (s *aggregatorSink) Send(ctx context.Context, events []classify.Event, _ [][]byte) (classify.Summary, error) {
	return s.agg.Ingest(ctx, s.origin, events)
}

// eventList frames raw event lines as an EventList body, bytes unchanged,
// so events without auditID get the same digest as in a local replay.
func eventList(raw [][]byte) []byte {
	var b bytes.Buffer
	b.WriteString(`{"kind":"EventList","apiVersion":"audit.k8s.io/v1","items":[`)
	b.Write(bytes.Join(raw, []byte(",")))
	b.WriteString("]}")
	return b.Bytes()
}

// serverSink counts through a running server's webhook.
type serverSink struct {
	c    *client.Client
	path string
}

func (s *serverSink) Send(_ context.Context, _ []classify.Event, raw [][]byte) (classify.Summary, error) {
	var resp webhook.Response
	err := post(s.c, s.path, raw, false, &resp)
	return resp.Summary, err
}

// post sends raw event lines to a server's webhook, as a dry run or not,
// and reads its answer into resp.
func post(c *client.Client, path string, raw [][]byte, dryRun bool, resp any) error {
	body, err := c.PostEvents(path, eventList(raw), dryRun)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(body, resp); err != nil {
		return fmt.Errorf("reading the webhook's answer: %w", err)
	}
	return nil
}

// planSink is a dry run, local or on the server. It remembers what would be
// counted, for printing.
type planSink struct {
	local  *aggregate.Aggregator
	origin classify.Origin
	server *client.Client
	path   string
	counts map[webhook.PlannedEvent]int64
}

func (s *planSink) Send(_ context.Context, events []classify.Event, raw [][]byte) (classify.Summary, error) {
	var planned []webhook.PlannedEvent
	if s.server != nil {
		var resp webhook.DryRunResponse
		if err := post(s.server, s.path, raw, true, &resp); err != nil {
			return classify.Summary{}, err
		}
		planned = resp.Events
	} else {
		ps, err := s.local.Plan(s.origin, events)
		if err != nil {
			return classify.Summary{}, err
		}
		for _, p := range ps {
			planned = append(planned, webhook.NewPlannedEvent(p))
		}
	}
	if s.counts == nil {
		s.counts = map[webhook.PlannedEvent]int64{}
	}
	var sum classify.Summary
	for _, p := range planned {
		sum.Tally(classify.Result(p.Result))
		sum.TallyAdmission(classify.Result(p.Admission))
		if classify.Result(p.Result) == classify.ResultCounted {
			key := webhook.PlannedEvent{API: p.API, Hour: p.Hour, Node: p.Node, Username: p.Username, UserAgent: p.UserAgent, Verb: p.Verb, AlreadyRemoved: p.AlreadyRemoved}
			s.counts[key]++
		}
	}
	return sum, nil
}

// write prints what would be counted, one row per API, hour, node, client
// and verb.
func (s *planSink) write(w io.Writer) error {
	keys := make([]webhook.PlannedEvent, 0, len(s.counts))
	for k := range s.counts {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b webhook.PlannedEvent) int {
		return cmp.Or(strings.Compare(a.API, b.API), strings.Compare(a.Hour, b.Hour), strings.Compare(a.Node, b.Node),
			strings.Compare(a.Username, b.Username), strings.Compare(a.UserAgent, b.UserAgent), strings.Compare(a.Verb, b.Verb))
	})
	tw := tabwriter.NewWriter(w, 0, 8, 3, ' ', 0)
	fmt.Fprintln(tw, "API\tHOUR\tNODE\tUSER\tUSER AGENT\tVERB\tWOULD COUNT")
	for _, k := range keys {
		api := cli.Terminal(k.API)
		if k.AlreadyRemoved {
			api += " (removed)"
		}
		// Every cell but the count comes from the audit events (or, with
		// --dry-run=server, from the server's answer): escaped as in
		// every other table.
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%d\n", api, cli.Terminal(k.Hour), cli.Terminal(k.Node), cli.Terminal(k.Username),
			cli.Terminal(cli.Dash(k.UserAgent)), cli.Terminal(k.Verb), s.counts[k])
	}
	return tw.Flush()
}

// showProgress draws a progress line on a terminal until the returned
// function is called; without a terminal it draws nothing.
func showProgress(o Options, prog *file.Progress) func() {
	if !o.Terminal {
		return func() {}
	}
	start := o.Now()
	stop := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		t := time.NewTicker(200 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-stop:
				fmt.Fprint(o.Stderr, "\r\x1b[K")
				return
			case <-t.C:
				fmt.Fprint(o.Stderr, "\r"+file.ProgressLine(prog.Bytes.Load(), prog.TotalBytes, prog.Events.Load(), o.Now().Sub(start))+"\x1b[K")
			}
		}
	}()
	return func() { close(stop); <-finished }
}

// writeSummary says what the replay read and counted. After an error it
// says the replay stopped, so that what it did count before is not read
// as the whole file's.
func writeSummary(w io.Writer, sum file.Summary, dryRun string, failed bool) {
	verb := "Replayed"
	counted := "counted"
	if dryRun != DryRunNone {
		verb = "Dry run (" + dryRun + "): read"
		counted = "would be counted"
	}
	if failed {
		verb = "Replay stopped by the error below after"
		if dryRun != DryRunNone {
			verb = "Dry run (" + dryRun + ") stopped by the error below after reading"
		}
	}
	names := make([]string, 0, len(sum.SkippedBy))
	for r := range sum.SkippedBy {
		names = append(names, r)
	}
	slices.Sort(names)
	reasons := make([]string, 0, len(names))
	for _, r := range names {
		reasons = append(reasons, fmt.Sprintf("%d %s", sum.SkippedBy[r], r))
	}
	why := ""
	if len(reasons) > 0 {
		why = " (" + strings.Join(reasons, ", ") + ")"
	}
	fmt.Fprintf(w, "%s %d events from %d input%s in %s: %d %s, %d duplicates, %d skipped%s, %d invalid lines.\n",
		verb, sum.Events, sum.Inputs, plural.S(sum.Inputs), sum.Elapsed.Round(time.Millisecond), sum.Counted, counted, sum.Duplicates, sum.Skipped, why, sum.Invalid)
	if sum.AdmissionCounted+sum.AdmissionDuplicates > 0 {
		fmt.Fprintf(w, "Admission webhooks: %d requests %s, %d duplicates (sunset report webhooks).\n", sum.AdmissionCounted, counted, sum.AdmissionDuplicates)
	}
	if len(sum.Examples) > 0 {
		fmt.Fprintf(w, "First invalid lines:\n")
		for _, ex := range sum.Examples {
			// File names and decoder messages can quote what the files
			// hold.
			fmt.Fprintf(w, "  %s:%d: %s: %s\n", cli.Terminal(ex.Input), ex.Line, cli.Terminal(ex.Reason), cli.Terminal(ex.Message))
		}
	}
}
