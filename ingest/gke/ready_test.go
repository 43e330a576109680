package gke

import (
	"context"
	"errors"
	"testing"

	"cloud.google.com/go/iam/apiv1/iampb"
	"cloud.google.com/go/pubsub/v2/pstest"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"
	"google.golang.org/api/option"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/kube-sunset/sunset/internal/testutil/pubsubtest"
)

// iamPolicy answers TestIamPermissions as Pub/Sub does, which pstest does
// not: with the permissions of those asked that the caller has.
type iamPolicy struct {
	iampb.UnimplementedIAMPolicyServer
	granted []string
}

func (p *iamPolicy) TestIamPermissions(_ context.Context, req *iampb.TestIamPermissionsRequest) (*iampb.TestIamPermissionsResponse, error) {
	var out []string
	for _, perm := range req.GetPermissions() {
		for _, g := range p.granted {
			if perm == g {
				out = append(out, perm)
			}
		}
	}
	return &iampb.TestIamPermissionsResponse{Permissions: out}, nil
}

func withIAM(granted ...string) pubsubtest.Option {
	return pubsubtest.WithService(func(g *grpc.Server) { iampb.RegisterIAMPolicyServer(g, &iamPolicy{granted: granted}) })
}

// errorReactor fails a pstest call.
type errorReactor struct{ err error }

func (r errorReactor) React(any) (bool, any, error) { return true, nil, r.err }

// Ready says whether the subscription is received from, and when it is
// not, why and what to do; the Source keeps trying meanwhile.
func TestReadySaysWhatToDo(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts []pubsubtest.Option
		// subscription replaces the server's.
		subscription string
		ok           bool
		why          string
	}{
		{name: "receiving from an emulator", ok: true},
		{name: "receiving with the consume permission", opts: []pubsubtest.Option{withIAM(consumePermission)}, ok: true},
		{name: "no such subscription", subscription: "projects/sunset-test/subscriptions/missing",
			why: "subscription projects/sunset-test/subscriptions/missing not found: create it on the topic the Log Router sink publishes to, or correct the subscription key"},
		{name: "no consume permission, or no subscription", opts: []pubsubtest.Option{withIAM("pubsub.subscriptions.get")},
			why: "cannot receive from projects/sunset-test/subscriptions/sunset: it does not exist, or Sunset's identity lacks pubsub.subscriptions.consume on it: create it on the topic the Log Router sink publishes to, and grant roles/pubsub.subscriber on it to the service account Sunset runs as (through Workload Identity on GKE)"},
		{name: "an emulator refusing", opts: []pubsubtest.Option{pubsubtest.WithReactor(pstest.ServerReactorOption{FuncName: "GetSubscription",
			Reactor: errorReactor{status.Error(codes.PermissionDenied, "User not authorized to perform this action.")}})},
			why: "permission denied on projects/sunset-test/subscriptions/sunset: grant roles/pubsub.subscriber on the subscription to the service account Sunset runs as (through Workload Identity on GKE)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := pubsubtest.Start(t, tc.opts...)
			reg := prometheus.NewRegistry()
			s := newSource(t, srv, newAckOrder(newCounter(t, reg)), reg, func(o *Options) {
				if tc.subscription != "" {
					o.Config.Subscription = tc.subscription
				}
			})
			ok, why := s.Ready()
			require.False(t, ok)
			require.Equal(t, "not started: Sunset has not yet connected to "+s.cfg.Subscription, why)
			stop := run(t, s)
			// Await tests Ready at each call the source starts: it says it
			// is ready before it opens its stream, and why not before it
			// probes again.
			if tc.ok {
				srv.Await(t, "ready", func() bool { ok, _ := s.Ready(); return ok })
				require.Equal(t, 1.0, metric(t, reg, "sunset_gke_receiving", map[string]string{"cluster": testCluster}))
				ids := srv.Publish(t, readEntry(t, "list-deprecated"))
				srv.Await(t, "receiving", func() bool { return srv.Acked(ids...) == 1 })
			} else {
				srv.Await(t, "the reason", func() bool { _, why := s.Ready(); return why == tc.why })
				require.Equal(t, 0.0, metric(t, reg, "sunset_gke_receiving", map[string]string{"cluster": testCluster}))
			}
			stop()
			ok, why = s.Ready()
			require.False(t, ok)
			require.Equal(t, "stopped", why)
		})
	}
}

// Receive's errors name what to do.
func TestExplainReceiveErrors(t *testing.T) {
	const sub = "projects/p/subscriptions/s"
	for code, want := range map[codes.Code]string{
		codes.NotFound:           "subscription projects/p/subscriptions/s not found: create it on the topic the Log Router sink publishes to, or correct the subscription key",
		codes.PermissionDenied:   "permission denied on projects/p/subscriptions/s: grant roles/pubsub.subscriber on the subscription to the service account Sunset runs as (through Workload Identity on GKE)",
		codes.Unauthenticated:    "not authenticated to Pub/Sub: Sunset uses Application Default Credentials; on GKE, enable Workload Identity for its Kubernetes service account; elsewhere, set GOOGLE_APPLICATION_CREDENTIALS",
		codes.FailedPrecondition: "cannot receive from projects/p/subscriptions/s (it is a push subscription): it must be a pull subscription, not detached from its topic",
		codes.ResourceExhausted:  "Pub/Sub quota exceeded receiving from projects/p/subscriptions/s; retrying",
		codes.Unavailable:        "cannot receive from projects/p/subscriptions/s: Unavailable: it is a push subscription; retrying",
	} {
		require.Equal(t, want, explain(sub, status.Error(code, "it is a push subscription")), code.String())
	}
	require.Equal(t, "cannot receive from projects/p/subscriptions/s: Unknown: the stream ended; retrying", explain(sub, errors.New("the stream ended")))
}

// Without client options the client finds Pub/Sub as the library does:
// PUBSUB_EMULATOR_HOST's emulator, or endpoint when it is set.
func TestEndpointAndEmulatorHost(t *testing.T) {
	for _, tc := range []struct {
		name   string
		env    bool
		change func(*Options, *pubsubtest.Server)
	}{
		{name: "PUBSUB_EMULATOR_HOST", env: true, change: func(o *Options, _ *pubsubtest.Server) { o.ClientOptions = nil }},
		{name: "endpoint", change: func(o *Options, srv *pubsubtest.Server) {
			o.Config.Endpoint = srv.Fake.Addr
			o.ClientOptions = []option.ClientOption{option.WithoutAuthentication(),
				option.WithGRPCDialOption(grpc.WithTransportCredentials(insecure.NewCredentials()))}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := pubsubtest.Start(t)
			if tc.env {
				t.Setenv("PUBSUB_EMULATOR_HOST", srv.Fake.Addr)
			}
			reg := prometheus.NewRegistry()
			counter := newCounter(t, reg)
			run(t, newSource(t, srv, counter, reg, func(o *Options) { tc.change(o, srv) }))
			ids := srv.Publish(t, readEntry(t, "list-deprecated"))
			srv.Await(t, "received and acknowledged", func() bool { return srv.Acked(ids...) == 1 })
			require.Equal(t, 1.0, metric(t, reg, "sunset_ingest_events_total", map[string]string{"source": SourceName, "result": "counted"}))
		})
	}
}
