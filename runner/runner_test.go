package runner

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
)

// recorder notes, in order, what happens to the components.
type recorder struct {
	mu     sync.Mutex
	events []string
}

func (r *recorder) note(s string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, s)
}

func (r *recorder) all() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.events...)
}

// blocking runs until its context is cancelled.
func (r *recorder) blocking(name string) func(context.Context) error {
	return func(ctx context.Context) error {
		<-ctx.Done()
		r.note(name + " returned")
		return nil
	}
}

func TestStopsInReverseOrderWhenTheContextEnds(t *testing.T) {
	var r recorder
	var g Group
	g.Add("store", r.blocking("store"), nil)
	g.Add("aggregator", r.blocking("aggregator"), nil)
	g.Add("http", r.blocking("http"), func() { r.note("http draining") })
	// A component with nothing left to do does not stop the others.
	g.Add("done-early", func(context.Context) error { return nil }, nil)

	ctx, cancel := context.WithCancel(context.Background())
	err := g.Run(ctx, func() { r.note("started"); cancel() })
	require.NoError(t, err)
	require.Equal(t, []string{"started", "http draining", "http returned", "aggregator returned", "store returned"}, r.all())
}

func TestAFailureStopsTheGroupWithItsError(t *testing.T) {
	var r recorder
	var g Group
	boom := errors.New("boom")
	fail := make(chan struct{})
	g.Add("store", r.blocking("store"), nil)
	g.Add("kafka", func(ctx context.Context) error {
		<-fail
		r.note("kafka failed")
		return boom
	}, nil)
	g.Add("http", r.blocking("http"), nil)

	err := g.Run(context.Background(), func() { close(fail) })
	require.ErrorIs(t, err, boom)
	require.EqualError(t, err, "kafka: boom")
	require.Equal(t, []string{"kafka failed", "http returned", "store returned"}, r.all())
}

func TestErrorsWhileStoppingAreReported(t *testing.T) {
	var g Group
	closing := errors.New("closing failed")
	g.Add("store", func(ctx context.Context) error { <-ctx.Done(); return closing }, nil)
	g.Add("http", func(ctx context.Context) error { <-ctx.Done(); return ctx.Err() }, nil)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	require.EqualError(t, g.Run(ctx, nil), "stopping store: closing failed")
}
