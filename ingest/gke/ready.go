package gke

import (
	"context"
	"fmt"
	"slices"
	"time"

	"cloud.google.com/go/iam/apiv1/iampb"
	"cloud.google.com/go/pubsub/v2/apiv1/pubsubpb"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/kube-sunset/sunset/countkey"
)

// consumePermission is what receiving needs; roles/pubsub.subscriber has
// it, and none of the permissions to read the subscription's settings.
const consumePermission = "pubsub.subscriptions.consume"

// probeTimeout bounds one check of the subscription.
const probeTimeout = 30 * time.Second

// probe asks Pub/Sub whether Sunset may receive from the subscription,
// before it tries, so that Ready can say what is wrong. Any caller may
// test its own permissions, which needs no role; Pub/Sub answers none for
// a subscription that does not exist.
func (s *Source) probe(ctx context.Context) (ok bool, why string) {
	ctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	admin := s.client.SubscriptionAdminClient
	res, err := admin.TestIamPermissions(ctx, &iampb.TestIamPermissionsRequest{Resource: s.cfg.Subscription, Permissions: []string{consumePermission}})
	switch status.Code(err) {
	case codes.OK:
		if slices.Contains(res.GetPermissions(), consumePermission) {
			return true, ""
		}
		return false, fmt.Sprintf("cannot receive from %s: it does not exist, or Sunset's identity lacks %s on it: create it on the topic the Log Router sink publishes to, and grant roles/pubsub.subscriber on it to the service account Sunset runs as (through Workload Identity on GKE)",
			s.cfg.Subscription, consumePermission)
	case codes.Unimplemented:
		// Emulators have no IAM: that the subscription exists is all
		// there is to know.
		if _, err = admin.GetSubscription(ctx, &pubsubpb.GetSubscriptionRequest{Subscription: s.cfg.Subscription}); err == nil {
			return true, ""
		}
	}
	return false, explain(s.cfg.Subscription, err)
}

// explain says why receiving from sub failed with err, and what to do.
func explain(sub string, err error) string {
	st, _ := status.FromError(err)
	switch st.Code() {
	case codes.NotFound:
		return fmt.Sprintf("subscription %s not found: create it on the topic the Log Router sink publishes to, or correct the subscription key", sub)
	case codes.PermissionDenied:
		return fmt.Sprintf("permission denied on %s: grant roles/pubsub.subscriber on the subscription to the service account Sunset runs as (through Workload Identity on GKE)", sub)
	case codes.Unauthenticated:
		return "not authenticated to Pub/Sub: Sunset uses Application Default Credentials; on GKE, enable Workload Identity for its Kubernetes service account; elsewhere, set GOOGLE_APPLICATION_CREDENTIALS"
	case codes.FailedPrecondition:
		return fmt.Sprintf("cannot receive from %s (%s): it must be a pull subscription, not detached from its topic", sub, countkey.Truncate(st.Message(), 200))
	case codes.ResourceExhausted:
		return fmt.Sprintf("Pub/Sub quota exceeded receiving from %s; retrying", sub)
	case codes.Canceled:
		return whyStopped
	}
	return fmt.Sprintf("cannot receive from %s: %s: %s; retrying", sub, st.Code(), countkey.Truncate(st.Message(), 200))
}
