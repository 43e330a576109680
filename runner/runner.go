// Package runner runs a server's components together: it starts them in
// the order they were added and, once the caller's context is done or one
// of them fails, stops them in the reverse order, each only after every
// component added after it has returned. Adding a component after those it
// feeds is what makes the stop order right: the HTTP server stops before
// the aggregator it feeds, and the aggregator before the store.
package runner

import (
	"context"
	"errors"
	"fmt"
)

// Group is a set of components that run and stop together. The zero value
// is ready to use.
type Group struct {
	components []component
}

type component struct {
	name string
	run  func(context.Context) error
	stop func()
}

// Add adds a component named name. run runs it until its context is
// cancelled, then returns; a nil return before that is not a failure (a
// component may have nothing left to do), an error is, and stops the
// group. stop, if not nil, is called at the component's turn to stop,
// before its context is cancelled, for a graceful end (an HTTP server's
// drain); it must make run return or leave it to the cancellation.
func (g *Group) Add(name string, run func(ctx context.Context) error, stop func()) {
	g.components = append(g.components, component{name: name, run: run, stop: stop})
}

// Run starts every component, calls started (if not nil) once all are
// started, and waits until ctx is done or a component fails. It then stops
// the components in the reverse order of Add and returns the error of the
// component that failed first, joined with those met while stopping.
func (g *Group) Run(ctx context.Context, started func()) error {
	type running struct {
		cancel context.CancelFunc
		done   chan error
	}
	failed := make(chan error, len(g.components))
	rs := make([]running, len(g.components))
	for i, c := range g.components {
		// Not derived from ctx: a component stops at its turn, not when
		// the caller's context ends.
		cctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
		done := make(chan error, 1)
		rs[i] = running{cancel: cancel, done: done}
		go func() {
			err := c.run(cctx)
			if err != nil && cctx.Err() == nil {
				failed <- fmt.Errorf("%s: %w", c.name, err)
			}
			done <- err
		}()
	}
	if started != nil {
		started()
	}
	var errs []error
	select {
	case <-ctx.Done():
	case err := <-failed:
		errs = append(errs, err)
	}
	for i := len(g.components) - 1; i >= 0; i-- {
		c, r := g.components[i], rs[i]
		if c.stop != nil {
			c.stop()
		}
		r.cancel()
		if err := <-r.done; err != nil && !errors.Is(err, context.Canceled) && !containsErr(errs, err) {
			errs = append(errs, fmt.Errorf("stopping %s: %w", c.name, err))
		}
	}
	return errors.Join(errs...)
}

// containsErr reports whether err is already reported, as the failure that
// stopped the group.
func containsErr(errs []error, err error) bool {
	for _, e := range errs {
		if errors.Is(e, err) {
			return true
		}
	}
	return false
}
