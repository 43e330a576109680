// Package gate decides whether a change to an object that holds a
// cluster's Kubernetes version may go ahead: which kinds hold a version
// and where (Kinds), which Sunset cluster an object stands for
// (ClusterFor), and the decision itself (Gate.Decide), which asks the
// same verdict as `sunset check` and the upgradechecks API.
//
// Reading AdmissionReviews and Cluster API hook requests is left to
// gate/admit and gate/capihook, and version spellings to
// gate/kubeversion.
package gate

import (
	"errors"
	"fmt"
	"time"
	"unicode/utf8"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	sunsetv1 "github.com/kube-sunset/sunset/api/v1"
	"github.com/kube-sunset/sunset/gate/kubeversion"
	"github.com/kube-sunset/sunset/verdict"
)

// Source is who asked: the admission webhook or Cluster API.
type Source string

// Sources, as the source label of sunset_gate_reviews_total.
const (
	SourceAdmission Source = "admission"
	SourceCAPI      Source = "capi"
)

// Outcome is what the gate decided, as the decision label of
// sunset_gate_reviews_total.
type Outcome string

// Outcomes.
const (
	// Allowed: not an upgrade of the minor release, or nothing in use
	// that the target deprecates or removes.
	Allowed Outcome = "allowed"
	// Refused: an API the target removes is in use.
	Refused Outcome = "refused"
	// Warned: allowed, with a warning for each deprecated API in use.
	Warned Outcome = "warned"
	// Overridden: refused by the verdict, let through by the override
	// annotation.
	Overridden Outcome = "overridden"
	// Unknown: the cluster is one Sunset never heard, or its counts are
	// stale; allowed or refused as gate.whenUnknown says.
	Unknown Outcome = "unknown"
	// Error: the request could not be read or the verdict not reached.
	Error Outcome = "error"
)

// WhenUnknown is what the gate does with a cluster whose counts are
// stale.
type WhenUnknown string

// Values of gate.whenUnknown.
const (
	Allow  WhenUnknown = "allow"
	Refuse WhenUnknown = "refuse"
)

// Checker is the verdict of upgradechecks: api.Service.UpgradeCheck.
type Checker interface {
	UpgradeCheck(q sunsetv1.Query, o verdict.CheckOptions) (sunsetv1.UpgradeCheck, error)
}

// Hearing is what Sunset has heard of a cluster.
type Hearing struct {
	// Known is false for a cluster Sunset never heard within its
	// retention.
	Known     bool
	LastHeard time.Time
	// ReadsMissing is true when the cluster sends events but no reads.
	ReadsMissing bool
}

// Listener says what Sunset has heard of a cluster.
type Listener interface {
	Heard(cluster string) (Hearing, error)
}

// OverrideRecord is an upgrade let through by override, as kept.
type OverrideRecord struct {
	Time    time.Time
	Source  Source
	Cluster string
	Kind    string
	Meta    Meta
	User    string
	Reason  string
	From    kubeversion.Version
	To      kubeversion.Version
}

// Recorder keeps overrides, for upgradechecks to show.
type Recorder interface {
	RecordOverride(OverrideRecord) error
}

// Options configure a Gate. Checker and Listener are required.
type Options struct {
	Checker  Checker
	Listener Listener
	// Clusters maps an object's namespace/name to a Sunset cluster.
	Clusters map[string]string
	// StaleAfter: a cluster silent that long is unknown; 0 means 2h.
	StaleAfter  time.Duration
	WhenUnknown WhenUnknown
	// Since is the verdict's window; 0 means 24h.
	Since time.Duration
	// CleanFor is the verdict's CleanFor.
	CleanFor time.Duration
	// Recorder, if set, keeps each override.
	Recorder   Recorder
	Logger     zerolog.Logger
	Registerer prometheus.Registerer
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

// Gate decides upgrades.
type Gate struct {
	opts    Options
	log     zerolog.Logger
	metrics *metrics
}

// New builds a Gate and registers its metrics.
func New(opts Options) *Gate {
	if opts.StaleAfter == 0 {
		opts.StaleAfter = 2 * time.Hour
	}
	if opts.Since == 0 {
		opts.Since = sunsetv1.DefaultCheckSince
	}
	if opts.WhenUnknown == "" {
		opts.WhenUnknown = Allow
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Registerer == nil {
		opts.Registerer = prometheus.NewRegistry()
	}
	return &Gate{opts: opts, log: opts.Logger.With().Str("component", "gate").Logger(), metrics: newMetrics(opts.Registerer)}
}

// Request is a change to judge.
type Request struct {
	Source Source
	// Kind names the object in messages: Cluster, KubeadmControlPlane.
	Kind string
	Meta Meta
	// From and To are the versions before and after the change.
	From, To kubeversion.Version
	// User made the change; empty when the source does not say (Cluster
	// API).
	User string
	// DryRun is a change that will not be stored: an override of it is
	// logged but not kept.
	DryRun bool
}

// Decision is the gate's answer.
type Decision struct {
	Outcome Outcome
	Allowed bool
	// Cluster is the Sunset cluster judged; empty when none was.
	Cluster string
	// Message says why a change is refused.
	Message string
	// Warnings go back to the client with an allowed change.
	Warnings []string
}

// Decide judges r and counts the decision. Only a raise of the minor
// release is judged: a patch release, a downgrade and no change pass
// without a word. An error means the verdict could not be reached; it is
// counted, and the caller answers with an error so that the webhook's
// failure policy applies.
func (g *Gate) Decide(r Request) (Decision, error) {
	d, err := g.decide(r)
	if err != nil {
		g.Failed(r.Source)
		return Decision{Outcome: Error}, err
	}
	g.metrics.reviews.WithLabelValues(string(r.Source), string(d.Outcome)).Inc()
	return d, nil
}

// ClusterFor is the Sunset cluster an object stands for, with the
// gate's gate.clusters (see the function ClusterFor).
func (g *Gate) ClusterFor(m Meta) string { return ClusterFor(m, g.opts.Clusters) }

// Count counts a decision the caller made without Decide, such as a
// change that does not touch the version.
func (g *Gate) Count(source Source, o Outcome) {
	if o == Error {
		g.Failed(source)
		return
	}
	g.metrics.reviews.WithLabelValues(string(source), string(o)).Inc()
}

// Failed counts a review answered with an error.
func (g *Gate) Failed(source Source) {
	g.metrics.reviews.WithLabelValues(string(source), string(Error)).Inc()
	g.metrics.lastError.Set(float64(g.opts.Now().UnixNano()) / 1e9)
}

func (g *Gate) decide(r Request) (Decision, error) {
	if !r.From.RaisesMinor(r.To) {
		return Decision{Outcome: Allowed, Allowed: true}, nil
	}
	cluster := ClusterFor(r.Meta, g.opts.Clusters)
	d := Decision{Cluster: cluster}
	what := fmt.Sprintf("%s %s", r.Kind, r.Meta.Key())
	upgrade := fmt.Sprintf("the upgrade of cluster %s from %s to %s", cluster, r.From.Release(), r.To.Release())
	if cluster == "" {
		return d, errors.New("the object has no name")
	}
	h, err := g.opts.Listener.Heard(cluster)
	if err != nil {
		return d, fmt.Errorf("reading what was heard of cluster %s: %w", cluster, err)
	}
	if !h.Known {
		d.Outcome, d.Allowed = Unknown, true
		d.Warnings = []string{fmt.Sprintf("sunset: %s was not judged: Sunset has never heard of cluster %q. Name the cluster Sunset counts with the label %s on %s, or in gate.clusters",
			upgrade, cluster, ClusterLabel, what)}
		return d, nil
	}
	stale := ""
	switch silent := g.opts.Now().Sub(h.LastHeard); {
	case silent > g.opts.StaleAfter:
		stale = fmt.Sprintf("Sunset has heard nothing from cluster %s for %s (gate.staleAfter is %s)", cluster, verdict.FormatDuration(silent.Truncate(time.Minute)), verdict.FormatDuration(g.opts.StaleAfter))
	case h.ReadsMissing:
		stale = fmt.Sprintf("cluster %s sends no get, list or watch in its audit events, so deprecated reads cannot be seen", cluster)
	}
	override := Override(r.Meta)
	if stale != "" {
		d.Outcome = Unknown
		if g.opts.WhenUnknown == Allow {
			d.Allowed = true
			d.Warnings = []string{fmt.Sprintf("sunset: %s was not judged: %s", upgrade, stale)}
			return d, nil
		}
		d.Message = fmt.Sprintf("sunset: %s is refused: it cannot be judged, %s (gate.whenUnknown is refuse). %s", upgrade, stale, howToOverride(what))
		if override != "" {
			return g.overridden(r, d, override), nil
		}
		return d, nil
	}

	check, err := g.opts.Checker.UpgradeCheck(sunsetv1.Query{Cluster: cluster},
		verdict.CheckOptions{Target: r.To.Release(), From: r.From.Release(), Since: g.opts.Since, CleanFor: g.opts.CleanFor, ExcludeSystem: true})
	if err != nil {
		return d, fmt.Errorf("the verdict for cluster %s at %s: %w", cluster, r.To.Release(), err)
	}
	res := check.Status
	if res.ExitCode == sunsetv1.ExitCodeRemoved {
		d.Outcome = Refused
		d.Message = refusal(upgrade, what, res)
		if override != "" {
			return g.overridden(r, d, override), nil
		}
		return d, nil
	}
	d.Allowed = true
	d.Warnings = deprecations(r.To, res)
	d.Outcome = Allowed
	if len(d.Warnings) > 0 {
		d.Outcome = Warned
	}
	return d, nil
}

// overridden lets a refused change through, logged with who asked and
// why.
func (g *Gate) overridden(r Request, d Decision, reason string) Decision {
	reason, r.User = truncate(reason, maxReasonBytes), truncate(r.User, maxUserBytes)
	if g.opts.Recorder != nil && !r.DryRun {
		err := g.opts.Recorder.RecordOverride(OverrideRecord{Time: g.opts.Now(), Source: r.Source, Cluster: d.Cluster, Kind: r.Kind,
			Meta: Meta{Namespace: r.Meta.Namespace, Name: r.Meta.Name}, User: r.User, Reason: reason, From: r.From, To: r.To})
		if err != nil {
			// The log line below keeps it.
			g.log.Warn().Err(err).Msg("could not keep an override for upgradechecks")
		}
	}
	g.log.Warn().Str("source", string(r.Source)).Str("kind", r.Kind).Str("namespace", r.Meta.Namespace).Str("name", r.Meta.Name).
		Str("cluster", d.Cluster).Str("from", r.From.String()).Str("to", r.To.String()).Str("user", r.User).Str("reason", reason).
		Bool("dry_run", r.DryRun).Str("refusal", d.Message).Msg("upgrade allowed by override")
	return Decision{Outcome: Overridden, Allowed: true, Cluster: d.Cluster,
		Warnings: []string{fmt.Sprintf("sunset: allowed by %s %q; without it: %s", OverrideAnnotation, reason, d.Message)}}
}

func howToOverride(what string) string {
	return fmt.Sprintf("To upgrade anyway, annotate %s with %s=\"<reason>\".", what, OverrideAnnotation)
}

// Bounds of what an override keeps and logs of values an object's
// author chose.
const (
	maxReasonBytes = 1024
	maxUserBytes   = 512
)

// truncate cuts s to at most n bytes, on a rune boundary.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	s = s[:n]
	for len(s) > 0 && !utf8.ValidString(s) {
		s = s[:len(s)-1]
	}
	return s + "…"
}
