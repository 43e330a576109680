package pubsubtest

import (
	"context"
	"testing"

	"cloud.google.com/go/pubsub/v2"
	"github.com/stretchr/testify/require"
)

// An event of the captures, as GKE writes it: a watch's end, impersonated,
// through a proxy, of a deprecated API.
func TestLogEntryWritesWhatGKEWrites(t *testing.T) {
	event := `{"kind":"Event","apiVersion":"audit.k8s.io/v1","level":"Metadata","auditID":"a1b2","stage":"ResponseComplete",` +
		`"requestURI":"/apis/e2e.example.com/v1beta1/namespaces/default/widgets?watch=true","verb":"watch",` +
		`"user":{"username":"admin","groups":["system:masters"]},"impersonatedUser":{"username":"alice"},` +
		`"sourceIPs":["203.0.113.7","10.0.0.1"],"userAgent":"kubectl/v1.36.3 (linux/amd64) kubernetes/2d8c1c4",` +
		`"objectRef":{"resource":"widgets","namespace":"default","apiGroup":"e2e.example.com","apiVersion":"v1beta1"},` +
		`"responseStatus":{"metadata":{},"code":200},"requestReceivedTimestamp":"2026-11-21T19:26:00.250114Z",` +
		`"stageTimestamp":"2026-11-21T19:31:02.117420Z","annotations":{"k8s.io/deprecated":"true"}}`
	got, err := LogEntry([]byte(event))
	require.NoError(t, err)
	require.JSONEq(t, `{
		"insertId": "a1b2",
		"logName": "projects/sunset-test/logs/cloudaudit.googleapis.com%2Fdata_access",
		"protoPayload": {
			"@type": "type.googleapis.com/google.cloud.audit.AuditLog",
			"authenticationInfo": {"principalEmail": "alice"},
			"authorizationInfo": [{"granted": true, "permission": "com.example.e2e.v1beta1.widgets.watch", "resource": "e2e.example.com/v1beta1/namespaces/default/widgets"}],
			"methodName": "com.example.e2e.v1beta1.widgets.watch",
			"requestMetadata": {"callerIp": "10.0.0.1", "callerSuppliedUserAgent": "kubectl/v1.36.3 (linux/amd64) kubernetes/2d8c1c4"},
			"resourceName": "e2e.example.com/v1beta1/namespaces/default/widgets",
			"serviceName": "k8s.io",
			"status": {}
		},
		"resource": {"type": "k8s_cluster", "labels": {"project_id": "sunset-test", "location": "us-central1", "cluster_name": "sunset-test"}},
		"timestamp": "2026-11-21T19:26:00.250114Z",
		"receiveTimestamp": "2026-11-21T19:31:02.117420Z",
		"severity": "INFO",
		"labels": {"k8s.io/deprecated": "true"},
		"operation": {"id": "a1b2", "producer": "k8s.io", "last": true}
	}`, string(got))
}

func TestLogEntryNamesAndCodes(t *testing.T) {
	for _, tc := range []struct {
		ref              *objectRef
		verb             string
		resource, method string
	}{
		{&objectRef{Resource: "pods", Namespace: "ns", Name: "p", APIVersion: "v1", Subresource: "exec"}, "create",
			"core/v1/namespaces/ns/pods/p/exec", "io.k8s.core.v1.pods.exec.create"},
		{&objectRef{Resource: "namespaces", Namespace: "ns", Name: "ns", APIVersion: "v1", Subresource: "finalize"}, "update",
			"core/v1/namespaces/ns/finalize", "io.k8s.core.v1.namespaces.finalize.update"},
		{&objectRef{Resource: "namespaces", APIVersion: "v1"}, "list", "core/v1/namespaces", "io.k8s.core.v1.namespaces.list"},
		{&objectRef{Resource: "deployments", APIGroup: "apps", APIVersion: "v1"}, "list", "apps/v1/deployments", "io.k8s.apps.v1.deployments.list"},
		{&objectRef{Resource: "roles", Namespace: "ns", Name: "r", APIGroup: "rbac.authorization.k8s.io", APIVersion: "v1"}, "get",
			"rbac.authorization.k8s.io/v1/namespaces/ns/roles/r", "io.k8s.authorization.rbac.v1.roles.get"},
		{nil, "get", "", "io.k8s.get"},
	} {
		resource, method := names(tc.ref, tc.verb)
		require.Equal(t, tc.resource, resource)
		require.Equal(t, tc.method, method)
	}
	for status, code := range map[float64]int{200: 0, 201: 0, 101: 0, 400: 3, 401: 16, 403: 7, 404: 5, 409: 10, 422: 9, 429: 8, 500: 13, 503: 14, 504: 4} {
		require.Equal(t, code, rpcCode(status), "%v", status)
	}
}

func TestLogEntryRefusesWhatGKECannotWrite(t *testing.T) {
	for event, want := range map[string]string{
		`{"verb":"get","auditID":"x"}`:              "no requestReceivedTimestamp or stageTimestamp",
		`{"stageTimestamp":"2026-11-21T19:26:00Z"}`: "no verb",
		`not json`: "not an audit event",
		`{"verb":"get","requestReceivedTimestamp":"yesterday"}`: "no requestReceivedTimestamp or stageTimestamp",
	} {
		_, err := LogEntry([]byte(event))
		require.ErrorContains(t, err, want, event)
	}
}

// The real client receives what Publish publishes, and the server tells
// its acknowledgement.
func TestServerDeliversToTheRealClient(t *testing.T) {
	srv := Start(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	client, err := pubsub.NewClient(ctx, Project, srv.ClientOptions(t)...)
	require.NoError(t, err)
	defer func() { _ = client.Close() }()
	ids := srv.Publish(t, []byte("one"), []byte("two"))
	require.Len(t, ids, 2)
	got := make(chan string, 2)
	done := make(chan error, 1)
	go func() {
		done <- client.Subscriber(srv.Subscription).Receive(ctx, func(_ context.Context, m *pubsub.Message) {
			got <- string(m.Data)
			m.Ack()
		})
	}()
	require.ElementsMatch(t, []string{"one", "two"}, []string{<-got, <-got})
	srv.Await(t, "both acknowledged", func() bool { return srv.Acked(ids...) == 2 })
	require.Equal(t, 1, srv.Deliveries(ids[0]))
	cancel()
	require.NoError(t, <-done)
}
