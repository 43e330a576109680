// Package parts opens what every command that counts or reads counts is
// built from, the one way for all of them: the lifecycle catalog, the
// field rules, the system users, the admission classes and the store, and
// over them the aggregator and the API's query services. serve (package
// app), report --data-dir (cli/connect) and replay (cli/replay) build from
// it, so that they judge events alike, and the commands that read a data
// directory do not link the server.
package parts

import (
	"errors"
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"github.com/kube-sunset/sunset/admission"
	"github.com/kube-sunset/sunset/aggregate"
	"github.com/kube-sunset/sunset/api"
	sunsetv1 "github.com/kube-sunset/sunset/api/v1"
	"github.com/kube-sunset/sunset/catalog"
	"github.com/kube-sunset/sunset/classify"
	"github.com/kube-sunset/sunset/config"
	"github.com/kube-sunset/sunset/fieldrule"
	"github.com/kube-sunset/sunset/store"
	"github.com/kube-sunset/sunset/systemusers"
)

// Parts are what every command that counts or reads counts is built from,
// so that serve, report --data-dir and replay judge events alike: the
// lifecycle catalog, the field rules, the system users, the admission
// classes and the store.
type Parts struct {
	Config  config.Config
	Catalog *catalog.Catalog
	Rules   *fieldrule.Set
	System  *systemusers.Classifier
	Classes *admission.Classes
	// Store is nil when Options.NoStore was set.
	Store *store.Store
	now   func() time.Time
}

// Options say how the store is opened.
type Options struct {
	// DataDir, if set, replaces Config.DataDir.
	DataDir string
	// NoStore builds everything but the store: a client-side dry run.
	NoStore bool
	// ReadOnly opens the store without its write lock, for reports.
	ReadOnly bool
	// Hint is added to the error when another process holds the store's
	// directory, to say what to do instead.
	Hint   string
	Logger zerolog.Logger
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// Registerer receives the store's metrics; nil registers none.
	Registerer prometheus.Registerer
}

// Open builds the parts from cfg. The configuration is checked before
// the store is opened, so a bad one leaves nothing to close.
func Open(cfg config.Config, o Options) (*Parts, error) {
	if o.Now == nil {
		o.Now = time.Now
	}
	p := &Parts{Config: cfg, System: systemusers.New(cfg.SystemUsers), now: o.Now}
	var err error
	if p.Catalog, err = catalog.New(cfg.Catalog.Extra); err != nil {
		return nil, err
	}
	if p.Rules, err = fieldrule.New(cfg.FieldRules); err != nil {
		return nil, err
	}
	if p.Classes, err = admission.NewClasses(cfg.Admission.ClassMap()); err != nil {
		return nil, err
	}
	if o.NoStore {
		return p, nil
	}
	dir := cfg.DataDir
	if o.DataDir != "" {
		dir = o.DataDir
	}
	p.Store, err = store.Open(store.Options{Dir: dir, ReadOnly: o.ReadOnly, Retention: cfg.Retention,
		Logger: o.Logger, Now: o.Now, MaxClients: cfg.MaxClientsPerNodeHour,
		MaxClusters: cfg.MaxStoredClusters, MaxNodes: cfg.MaxAPIServersPerCluster, Merge: aggregate.StoreMerge(), Registerer: o.Registerer})
	if err != nil {
		var inUse *store.InUseError
		if o.Hint != "" && errors.As(err, &inUse) {
			return nil, fmt.Errorf("%w\n%s", err, o.Hint)
		}
		return nil, err
	}
	return p, nil
}

// Close closes the store, if any.
func (p *Parts) Close() error {
	if p.Store == nil {
		return nil
	}
	return p.Store.Close()
}

// Aggregator is an aggregator over the parts. o gives what only a server
// has (metrics, labels, the admission counter's labels); the rest comes
// from the parts and their configuration.
func (p *Parts) Aggregator(o aggregate.Options) *aggregate.Aggregator {
	o.Store, o.Catalog, o.FieldRules, o.IsSystem = p.Store, p.Catalog, p.Rules, p.System.IsSystem
	o.UserAgent = classify.UserAgentMode(p.Config.UserAgent)
	o.ClusterVersions = p.Config.ClusterVersions()
	o.Retention = p.Config.Retention
	o.Now = p.now
	return aggregate.New(o)
}

// Service reads APIRequestCounts from the store.
func (p *Parts) Service() *api.Service {
	svc := api.NewService(p.Store, p.Catalog, p.Rules, p.System.IsSystem, p.now)
	// The config was validated, exemptions included.
	if e, err := config.ParseExemptions(p.Config.Exemptions); err == nil && len(e) > 0 {
		svc.WithExemptions(staticExemptions(e))
	}
	return svc
}

// WebhookService reads WebhookCounts from the store.
func (p *Parts) WebhookService() *api.WebhookService {
	return api.NewWebhookService(p.Store, p.Classes, p.now)
}

// staticExemptions are the config file's exemptions: a data directory's
// reader has no ConfigMap to read more from.
type staticExemptions []sunsetv1.Exemption

func (e staticExemptions) Exemptions() []sunsetv1.Exemption { return e }

// DataDirReader reads the store as the API serves it, for the commands
// that read a data directory (--data-dir) instead of a server: the same
// APIRequestCounts and WebhookCounts, and a ServerInfo with the
// configured retention. It is here, where the parts are, so that the CLI
// packages, which read through their own Reader interface, import the
// API's types and not its server.
type DataDirReader struct {
	*api.Service
	*api.WebhookService
	retention time.Duration
}

// Info describes the data directory as its server would.
func (d DataDirReader) Info() (sunsetv1.ServerInfo, error) { return d.Service.Info(d.retention), nil }

// Reader reads the store, read-only or not, through the API's services.
func (p *Parts) Reader() DataDirReader {
	return DataDirReader{p.Service(), p.WebhookService(), p.Config.Retention}
}
