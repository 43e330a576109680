package app

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/kube-sunset/sunset/config"
	"github.com/kube-sunset/sunset/runner"
)

// Run serves until ctx is done or a component fails, then stops every
// component in the reverse order of start (see package runner):
//
//  1. HTTP: not ready, new batches refused with 503 while the ones in
//     flight finish (they wait for their commits), then the server stops;
//  2. the followed files and the Kafka consumer (or fleet), so that their
//     last batch commits;
//  3. the aggregator, which commits what it accepted, and the store's
//     maintenance;
//  4. the cluster's client CA watch;
//  5. badger is closed.
//
// /-/ready answers 503 from the start until every part runs, and again
// from the first step of shutdown. Run returns the error of the component
// that failed, joined with any that stopping met.
func (a *App) Run(ctx context.Context) error {
	var g runner.Group
	g.Add("store", func(ctx context.Context) error {
		<-ctx.Done()
		if err := a.parts.Close(); err != nil {
			return fmt.Errorf("closing: %w", err)
		}
		return nil
	}, nil)
	g.Add("access", func(ctx context.Context) error { a.access.Run(ctx); return nil }, nil)
	g.Add("aggregator", func(ctx context.Context) error { a.agg.Run(ctx); return nil }, nil)
	g.Add("maintenance", func(ctx context.Context) error { a.store.Maintain(ctx, maintenanceInterval); return nil }, nil)
	for _, f := range a.followers {
		g.Add("follow", f.Run, nil)
	}
	for _, m := range a.managed {
		g.Add(m.kind, m.run, nil)
	}
	switch {
	case a.fleet != nil:
		// Runs the filter's consumer too.
		g.Add("fleet", a.fleet.Run, nil)
	case a.kafka != nil:
		g.Add("kafka", a.kafka.Run, nil)
	}
	if a.certs != nil {
		g.Add("certs", a.runCerts, nil)
	}
	if a.clusterScan != nil {
		g.Add("cluster scan", a.clusterScan.Run, nil)
	}
	if a.exemptions != nil && a.exemptions.cms != nil {
		g.Add("exemptions", a.runExemptions, nil)
	}
	g.Add("http", a.serve, a.drain)

	err := g.Run(ctx, func() {
		if a.starting != nil {
			a.starting()
		}
		a.state.Store(int32(stateReady))
		a.log.Info().Str("listen", a.Addr().String()).Bool("tls", a.TLS()).Str("data_dir", a.cfg.DataDir).
			Bool("open_to_anyone", a.access.Open()).Msg("sunset is serving")
		if a.access.Open() && !config.LoopbackListen(a.cfg.Listen) {
			a.log.Warn().Str("listen", a.cfg.Listen).Msg("allow-unauthenticated is set: anyone who reaches this address can read usernames, workloads and source addresses, and reset counts")
		}
	})
	a.log.Info().Msg("sunset stopped")
	return err
}

// serve serves HTTP until drain shuts the server down.
func (a *App) serve(context.Context) error {
	var err error
	if a.TLS() {
		err = a.srv.ServeTLS(a.listener, "", "")
	} else {
		err = a.srv.Serve(a.listener)
	}
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return err
}

// drain turns the server not ready, refuses new batches, waits for those
// in flight up to the shutdown timeout and shuts the HTTP server down.
func (a *App) drain() {
	a.log.Info().Msg("shutting down: draining in-flight batches")
	a.state.Store(int32(stateDraining))
	a.webhook.Drain()
	if a.draining != nil {
		a.draining()
	}
	ctx, cancel := context.WithTimeout(context.Background(), a.cfg.ShutdownTimeout)
	defer cancel()
	err := a.webhook.Wait(ctx)
	if err == nil {
		err = a.srv.Shutdown(ctx)
	}
	if err != nil {
		// Clients that keep connections open (an apiserver's HTTP/2
		// connection can) must not hold the process: no handler runs past
		// this point that has not already been answered or cut off.
		a.log.Warn().Err(err).Dur("shutdown_timeout", a.cfg.ShutdownTimeout).Msg("connections still open after the shutdown timeout; closing them")
		_ = a.srv.Close()
	}
}

// maintenanceInterval is how often the store runs value-log GC, and looks
// whether an hour has expired.
const maintenanceInterval = 10 * time.Minute
