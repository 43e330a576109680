// Package eks counts the requests of an EKS cluster from the kube-apiserver
// audit logs EKS writes to CloudWatch Logs, each exactly once.
//
// CloudWatch gives no offset to resume from and may deliver an event
// after later ones, and EKS writes one stream per apiserver, each of
// which may reach CloudWatch minutes behind the others. So a Source lists
// the audit streams (DescribeLogStreams) and reads each with
// FilterLogEvents from its own position; every overlap, a sweep reads
// each stream again from a little before where it stood at the previous
// sweep, for events that arrived late, and skips the events it has read
// already. Where each stream stands, its newest time and the events read
// that a sweep can return, is a cursor committed in the same transaction
// as the counts of the events read up to it: a restart, however abrupt,
// neither loses an event nor counts one twice.
package eks

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/cloudwatchlogs"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"github.com/kube-sunset/sunset/countkey"
	"github.com/kube-sunset/sunset/ingest/auditjson"
	"github.com/kube-sunset/sunset/ingest/sink"
	"github.com/kube-sunset/sunset/internal/backoff"
	"github.com/kube-sunset/sunset/internal/logbridge"
)

// SourceName is the source label of events read from EKS.
const SourceName = "eks"

// Options configures a Source.
type Options struct {
	Config   Config
	Ingester sink.Ingester
	// Tallies counts what could not be decoded or was set aside
	// undecoded; nil counts nothing.
	Tallies sink.Tallies
	Cursors sink.CursorReader
	Logger  zerolog.Logger
	// Registerer takes the sunset_eks_ metrics; nil registers none.
	Registerer prometheus.Registerer
	// Newest, if set, is called with the time of the newest event
	// committed, after each commit that moves it.
	Newest func(cluster string, t time.Time)
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// AWSConfig is the AWS configuration to use; nil means the SDK's
	// default chain (IRSA, EKS Pod Identity, the environment).
	AWSConfig *aws.Config
	// Entry names the config entry in the metrics' entry label, so that
	// two entries of one cluster keep their series apart; empty means
	// the log group, which no two entries of a cluster share.
	Entry string
	// Prefilter sets aside, undecoded, the events that cannot count;
	// nil decodes every event. What it sets aside is told to Tallies.
	Prefilter *auditjson.Prefilter
}

// failuresUntilNotReady is how many polls in a row may fail before Ready
// says so: one failure, retried, is not worth taking a replica out.
const failuresUntilNotReady = 3

// maxRetryPause bounds Run's pause after failed polls.
const maxRetryPause = 5 * time.Minute

// Source reads one cluster's audit log streams; call Run.
type Source struct {
	cfg     Config
	o       Options
	tallies sink.Tallies
	region  string
	client  *cloudwatchlogs.Client
	metrics *metrics
	log     zerolog.Logger
	now     func() time.Time
	// state is where reading stands, as committed; nil when it must be
	// read from the store again (at start, and after a failed poll,
	// whose pages may have committed or not).
	state *checkpoint
	// started is set once the first checkpoint was read.
	started bool
	// newest is the newest event time told to Options.Newest.
	newest int64
	knobs  knobs

	mu     sync.Mutex
	status status
}

// knobs are what tests turn; New leaves them zero.
type knobs struct {
	// pageLimit is FilterLogEvents' limit of events a page; 0 is AWS's
	// default (10,000, or 1 MB).
	pageLimit int32
	// maxSeen replaces maxSeen.
	maxSeen int
	// sweepEvery replaces the overlap as the time between sweeps.
	sweepEvery time.Duration
	// retryStart is the first pause after a failed poll; 0 is the poll
	// interval.
	retryStart time.Duration
	// retryDelay replaces the SDK's pause between attempts of a call.
	retryDelay time.Duration
	// wake, when a poll waits, starts the next at once.
	wake chan struct{}
	// committed is called after each page's commit, with the summary of
	// its events.
	committed func(sum pageSummary)
	// polled is called after each poll, with when it started and how it
	// ended.
	polled func(started time.Time, err error)
}

type status struct {
	polled   bool
	failures int
	why      string
}

// New builds a source; it checks the config and the AWS Region but does
// not contact AWS.
func New(o Options) (*Source, error) {
	return newSource(o, knobs{})
}

func newSource(o Options, k knobs) (*Source, error) {
	cfg := o.Config.WithDefaults()
	if err := cfg.Validate("eks"); err != nil {
		return nil, err
	}
	if o.Ingester == nil || o.Cursors == nil {
		return nil, errors.New("eks: Options.Ingester and Options.Cursors are required")
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if k.maxSeen <= 0 {
		k.maxSeen = maxSeen
	}
	if k.retryStart <= 0 {
		k.retryStart = cfg.PollInterval
	}
	awsCfg, err := awsConfig(cfg, o.AWSConfig, logbridge.AWSLogger(o.Logger.With().Str("component", "eks").Str("cluster", cfg.Cluster).Logger()))
	if err != nil {
		return nil, err
	}
	if o.Entry == "" {
		o.Entry = cfg.LogGroup
	}
	if k.sweepEvery <= 0 {
		k.sweepEvery = cfg.Overlap
	}
	m, err := newMetrics(o.Registerer, cfg.Cluster, o.Entry)
	if err != nil {
		return nil, err
	}
	log := o.Logger.With().Str("component", "eks").Str("cluster", cfg.Cluster).Str("log_group", cfg.LogGroup).Logger()
	return &Source{cfg: cfg, o: o, tallies: sink.OrNone(o.Tallies), region: awsCfg.Region, metrics: m, log: log, now: o.Now, knobs: k,
		client: newClient(cfg, awsCfg, m, log, k.retryDelay)}, nil
}

// cursorName names the checkpoint; a cluster read from another log group
// starts afresh.
func (s *Source) cursorName() string { return "eks:" + s.cfg.Cluster + ":" + s.cfg.LogGroup }

// Run polls the log group every PollInterval until ctx ends, and returns
// ctx's error. A failed poll is retried after a pause that doubles up to
// 5 minutes, from where the committed counts end; nothing else ends Run.
func (s *Source) Run(ctx context.Context) error {
	retry := backoff.New(s.knobs.retryStart, max(s.knobs.retryStart, maxRetryPause))
	for {
		started := s.now()
		err := s.poll(ctx)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		s.done(err)
		if s.knobs.polled != nil {
			s.knobs.polled(started, err)
		}
		pause := s.cfg.PollInterval
		if err != nil {
			s.state = nil
			if errors.Is(err, countkey.ErrNoSpace) {
				// Paused until there is room; look again at the first pace.
				retry.Reset()
				s.log.Warn().Err(err).Dur("retry_in", retry.Peek()).Msg("reading paused: no room to commit")
			} else {
				ev := s.log.Warn()
				if throttled(err) {
					ev = s.log.Debug()
				}
				ev.Str("error", s.explain(err)).Dur("retry_in", retry.Peek()).Msg("poll failed; retrying from the last commit")
			}
			pause = retry.Next()
		} else {
			retry.Reset()
		}
		t := time.NewTimer(pause)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		case <-s.knobs.wake:
			t.Stop()
		}
	}
}

// done notes how a poll ended, for Ready.
func (s *Source) done(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err == nil {
		s.status = status{polled: true}
		s.metrics.lastPoll.Set(float64(s.now().UnixNano()) / 1e9)
		return
	}
	s.status.failures++
	s.status.why = s.explain(err)
}

// Ready reports whether the source reads its log group: not until a poll
// has read it to the end, nor once three polls in a row have failed. why
// says what is wrong and what to do.
func (s *Source) Ready() (ok bool, why string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.status
	switch {
	case st.failures >= failuresUntilNotReady:
		return false, fmt.Sprintf("%s (%d polls in a row failed)", st.why, st.failures)
	case st.failures > 0 && !st.polled:
		return false, st.why
	case !st.polled:
		return false, fmt.Sprintf("eks %s: the first poll of %s has not finished", s.cfg.Cluster, s.cfg.LogGroup)
	}
	return true, ""
}
