package app

import (
	"cmp"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/kube-sunset/sunset/config"
	"github.com/kube-sunset/sunset/ingest/auditjson"
	"github.com/kube-sunset/sunset/ingest/file"
	"github.com/kube-sunset/sunset/ingest/fleet"
	"github.com/kube-sunset/sunset/ingest/kafka"
	"github.com/kube-sunset/sunset/ingest/sink"
	"github.com/kube-sunset/sunset/ingest/webhook"
)

// buildInputs builds what feeds the aggregator: the webhook, the followed
// files, and the Kafka consumer or the fleet.
func (a *App) buildInputs(reg *prometheus.Registry, now func() time.Time) error {
	cfg, st := a.cfg, a.store
	var prefilter *auditjson.Prefilter
	if cfg.Decoder == config.DecoderPrefilter {
		prefilter = auditjson.NewPrefilter(a.agg.Interest())
	}
	// What the webhook and files count also goes to the fleet's topic
	// with kafka.forward.
	var local interface {
		webhook.Ingester
		sink.Ingester
	} = a.agg
	if cfg.Kafka.Fleet.Enabled() {
		var err error
		a.fleet, err = fleet.New(fleet.Options{Config: cfg.Kafka.Config, Fleet: cfg.Kafka.Fleet, Forward: cfg.Kafka.Forward,
			DefaultCluster: cfg.DefaultCluster,
			Aggregator:     a.agg, Tallies: a.agg, Store: st, Logger: a.log, Registerer: reg, Prefilter: prefilter})
		if err != nil {
			return err
		}
		a.kafka = a.fleet.Consumer()
		if fw := a.fleet.Forwarder(); fw != nil {
			local = fw
		}
	}
	for _, ff := range cfg.Ingest.Files {
		a.followers = append(a.followers, file.NewFollower(file.FollowOptions{
			Path: ff.Path, Node: ff.Node, Cluster: cmp.Or(ff.Cluster, cfg.DefaultCluster),
			Ingester: local, Tallies: a.agg, Cursors: st, Logger: a.log, Prefilter: prefilter,
		}))
	}
	if err := a.buildManaged(local, prefilter, reg, now); err != nil {
		return err
	}
	if cfg.Kafka.Enabled() && a.fleet == nil {
		var err error
		a.kafka, err = kafka.New(kafka.Options{Config: cfg.Kafka.Config, DefaultCluster: cfg.DefaultCluster,
			Ingester: a.agg, Tallies: a.agg, Cursors: st, Logger: a.log, Registerer: reg, Prefilter: prefilter})
		if err != nil {
			return err
		}
	}

	token := ""
	if cfg.WebhookTokenFile != "" {
		raw, err := os.ReadFile(cfg.WebhookTokenFile)
		if err != nil {
			return fmt.Errorf("webhook-token-file: %w", err)
		}
		if token = strings.TrimSpace(string(raw)); token == "" {
			return fmt.Errorf("webhook-token-file %s is empty", cfg.WebhookTokenFile)
		}
	}
	var tokens webhook.Tokens
	if cfg.WebhookTokenAuthFile != "" {
		var err error
		if tokens, err = webhook.LoadTokenFile(cfg.WebhookTokenAuthFile, cfg.DefaultCluster); err != nil {
			return err
		}
	}
	if !cfg.WebhookAuthenticated() && !config.LoopbackListen(cfg.Listen) {
		// Validate let this through only because it was asked for.
		a.log.Warn().Str("listen", cfg.Listen).
			Msg("the webhook accepts batches without credentials on a non-loopback address (webhook-allow-unauthenticated): anyone who reaches it can add counts")
	}
	a.webhook = webhook.New(webhook.Options{
		Token:                    token,
		Tokens:                   tokens,
		RequireClientCert:        cfg.TLSClientCAFile != "",
		Ingester:                 local,
		Tallies:                  a.agg,
		Logger:                   a.log,
		Registerer:               reg,
		DefaultCluster:           cfg.DefaultCluster,
		MaxBodyBytes:             cfg.MaxBodyBytes,
		MaxInFlight:              cfg.MaxInFlightBatches,
		MaxInFlightPerCredential: cfg.MaxInFlightBatchesPerCredential,
		MinBodyBytesPerSecond:    cfg.MinBodyBytesPerSecond,
		KeepRequestObject:        a.agg.NeedsRequestObject,
		Prefilter:                prefilter,
	})
	return nil
}
