// Package pubsubtest gives tests a real Pub/Sub server, pstest (Google's
// in-process fake, spoken to over gRPC by the real client), with a topic
// and a subscription on it, and LogEntry, which writes an audit event as
// GKE's Log Router sink publishes it.
//
//	srv := pubsubtest.Start(t)
//	src, err := gke.New(ctx, gke.Options{
//		Config:        gke.Config{Cluster: "prod", Subscription: srv.Subscription},
//		ClientOptions: srv.ClientOptions(t), ...})
//	entry, err := pubsubtest.LogEntry(eventJSON)
//	ids := srv.Publish(t, entry)
//	srv.AwaitAcked(t, ids...)
//
// Nothing here polls: the server tells waiters of each acknowledgement
// it applies, and of each call a client of ClientOptions starts (Await).
//
// It is for tests only; production code must not import it.
package pubsubtest

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"cloud.google.com/go/pubsub/v2/apiv1/pubsubpb"
	"cloud.google.com/go/pubsub/v2/pstest"
	"google.golang.org/api/option"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

// Project is the project of the topic and subscription Start creates.
const Project = "sunset-test"

// AckDeadlineSeconds is the subscription's ack deadline, the least Pub/Sub
// allows; the client extends it while a message is held.
const AckDeadlineSeconds = 10

// Server is a running pstest server with one topic and one subscription.
type Server struct {
	// Fake is the server itself: Message(id) tells a message's deliveries
	// and acknowledgements.
	Fake *pstest.Server
	// Topic and Subscription are full names:
	// projects/sunset-test/topics/gke-audit and
	// projects/sunset-test/subscriptions/sunset.
	Topic, Subscription string
	// ahead is how far the server's clock is ahead of the real one.
	ahead atomic.Int64

	mu sync.Mutex
	// changed is closed, and replaced, at each acknowledgement the server
	// is asked to apply and each call a client of ClientOptions starts.
	changed chan struct{}
}

// changes returns a channel closed at the next change (notify): a waiter
// takes it before it tests its condition, so that no change between the
// test and the wait goes unnoticed.
func (s *Server) changes() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.changed
}

// notify wakes every waiter.
func (s *Server) notify() {
	s.mu.Lock()
	defer s.mu.Unlock()
	close(s.changed)
	s.changed = make(chan struct{})
}

// ackNotifier is the reactor on Acknowledge that wakes waiters. pstest
// runs it holding the server's lock, which it keeps until it has applied
// the acknowledgement: a waiter woken reads the acknowledgements
// (Fake.Message) under that lock, so after it. It never answers in
// pstest's place.
type ackNotifier struct{ s *Server }

func (n ackNotifier) React(any) (handled bool, ret any, err error) {
	n.s.notify()
	return false, nil, nil
}

// Option changes the server Start runs.
type Option func(*options)

type options struct {
	reactors []pstest.ServerReactorOption
	services []func(*grpc.Server)
}

// WithReactor has pstest answer a call with the reactor's answer instead
// of its own, e.g. to make GetSubscription fail.
func WithReactor(r pstest.ServerReactorOption) Option {
	return func(o *options) { o.reactors = append(o.reactors, r) }
}

// WithService registers a further gRPC service on the server, for an API
// pstest lacks (IAM).
func WithService(register func(*grpc.Server)) Option {
	return func(o *options) { o.services = append(o.services, register) }
}

// Start runs a server on a random loopback port until the test ends and
// creates its topic and subscription.
func Start(t testing.TB, opts ...Option) *Server {
	t.Helper()
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	s := &Server{Topic: "projects/" + Project + "/topics/gke-audit", Subscription: "projects/" + Project + "/subscriptions/sunset",
		changed: make(chan struct{})}
	// The notifier comes first, so that it hears of every call, whatever
	// the reactors after it answer.
	reactors := append([]pstest.ServerReactorOption{{FuncName: "Acknowledge", Reactor: ackNotifier{s}}}, o.reactors...)
	fake := pstest.NewServerWithCallback(0, func(g *grpc.Server) {
		for _, register := range o.services {
			register(g)
		}
	}, reactors...)
	t.Cleanup(func() { _ = fake.Close() })
	s.Fake = fake
	fake.SetTimeNowFunc(func() time.Time { return time.Now().Add(time.Duration(s.ahead.Load())) })
	ctx := context.Background()
	if _, err := fake.GServer.CreateTopic(ctx, &pubsubpb.Topic{Name: s.Topic}); err != nil {
		t.Fatalf("pubsubtest: creating %s: %v", s.Topic, err)
	}
	if _, err := fake.GServer.CreateSubscription(ctx, &pubsubpb.Subscription{Name: s.Subscription, Topic: s.Topic, AckDeadlineSeconds: AckDeadlineSeconds}); err != nil {
		t.Fatalf("pubsubtest: creating %s: %v", s.Subscription, err)
	}
	return s
}

// ClientOptions returns the options with which the real Pub/Sub client
// reaches the server: a connection of its own, without TLS or
// credentials, closed when the test ends. Each call the client starts on
// it, a stream (StreamingPull) or not, wakes Await's waiters: what the
// client did before the call is done when they test their condition.
func (s *Server) ClientOptions(t testing.TB) []option.ClientOption {
	t.Helper()
	conn, err := grpc.NewClient(s.Fake.Addr, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithUnaryInterceptor(func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
			s.notify()
			return invoker(ctx, method, req, reply, cc, opts...)
		}),
		grpc.WithStreamInterceptor(func(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
			s.notify()
			return streamer(ctx, desc, cc, method, opts...)
		}))
	if err != nil {
		t.Fatalf("pubsubtest: dialing %s: %v", s.Fake.Addr, err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return []option.ClientOption{option.WithGRPCConn(conn)}
}

// Publish publishes each of data as one message to the topic, as a Log
// Router sink does, and returns their message IDs in order. The messages
// are in the subscription when it returns.
func (s *Server) Publish(t testing.TB, data ...[]byte) []string {
	t.Helper()
	ids := make([]string, len(data))
	for i, d := range data {
		ids[i] = s.Fake.Publish(s.Topic, d, nil)
	}
	return ids
}

// Advance moves the server's clock forward by d, so that the ack deadline
// of every message delivered and neither acknowledged nor handed back
// passes, and the server delivers it again: what Pub/Sub does after a
// subscriber went away holding messages (a stream closed with messages on
// the wire). pstest drops messages published more than 10 minutes before
// its clock that are not out for delivery, so keep the total under that.
func (s *Server) Advance(d time.Duration) { s.ahead.Add(int64(d)) }

// awaitTimeout bounds a wait of Await or AwaitAcked.
const awaitTimeout = time.Minute

// Await waits until cond holds, and fails the test, saying what it waited
// for, if that takes over a minute. It tests cond at once and again at
// each change: each acknowledgement the server applies, and each call a
// client of ClientOptions starts. A condition no such change follows is
// not seen to hold.
func (s *Server) Await(t testing.TB, what string, cond func() bool) {
	t.Helper()
	timeout := time.NewTimer(awaitTimeout)
	defer timeout.Stop()
	for {
		changed := s.changes()
		if cond() {
			return
		}
		select {
		case <-changed:
		case <-timeout.C:
			t.Fatalf("pubsubtest: waited a minute for %s", what)
		}
	}
}

// AwaitAcked waits until every message of ids has been acknowledged, and
// fails the test if that takes over a minute. A message that was on the
// wire when its subscriber closed its stream stays leased to that stream
// until its ack deadline passes, as in Pub/Sub; rather than wait for that,
// AwaitAcked moves the server's clock past every deadline (Advance, two
// minutes) whenever a second goes by without a new acknowledgement, at
// most three times. Messages still held by a live subscriber are then
// delivered again too: a subscriber that counts exactly once counts them
// once.
func (s *Server) AwaitAcked(t testing.TB, ids ...string) {
	t.Helper()
	const stall, step, maxSteps = time.Second, 2 * time.Minute, 3
	timeout := time.NewTimer(awaitTimeout)
	defer timeout.Stop()
	stalled := time.NewTimer(stall)
	defer stalled.Stop()
	last, steps := -1, 0
	for {
		changed := s.changes()
		n := s.Acked(ids...)
		if n == len(ids) {
			return
		}
		if n != last {
			last = n
			stalled.Reset(stall)
		}
		select {
		case <-changed:
		case <-stalled.C:
			// A second without a new acknowledgement.
			if steps < maxSteps {
				s.Advance(step)
				steps++
				stalled.Reset(stall)
			}
		case <-timeout.C:
			t.Fatalf("pubsubtest: %d of %d messages acknowledged after a minute", s.Acked(ids...), len(ids))
		}
	}
}

// Acked is how many of the messages ids have been acknowledged.
func (s *Server) Acked(ids ...string) int {
	n := 0
	for _, id := range ids {
		if m := s.Fake.Message(id); m != nil && m.Acks > 0 {
			n++
		}
	}
	return n
}

// Deliveries is how many times the message id was delivered.
func (s *Server) Deliveries(id string) int {
	if m := s.Fake.Message(id); m != nil {
		return m.Deliveries
	}
	return 0
}
