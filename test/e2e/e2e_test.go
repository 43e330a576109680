package e2e

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

const rounds = 4

// A real kube-apiserver, given deploy/'s audit policy and webhook
// kubeconfig, sends its audit webhook over HTTPS with a token and a client
// certificate to `sunset serve`. Sunset is killed with SIGKILL mid-run and
// restarted; the apiserver's retries deliver what it missed. Every count
// Sunset serves equals the apiserver's own audit log file.
func TestKubeAPIServerAuditWebhookToSunset(t *testing.T) {
	sunsetBin, apiserverBin, etcdBin := peerBinaries(t)

	p := newPKI(t)
	s, token := startSunset(t, sunsetBin, p)
	checkWebhookRefusesStrangers(t, s, p, token)

	kubeconfig := webhookKubeconfig(t, p, s.url+"/audit/webhook/"+clusterName+"/"+nodeName, token)
	a := startAPIServer(t, apiserverBin, startEtcd(t, etcdBin, p), p, kubeconfig)
	tr := prepare(t, a)

	ctx := ctxWithin(t, 10*time.Minute)
	stopPolling := tr.poll(ctx)
	tr.round(ctx, 0)
	tr.round(ctx, 1)
	s.proc.stop(t, syscall.SIGKILL, 10*time.Second)
	// Sunset is down for this round: every batch the apiserver sends fails
	// and is retried, 10 s later at first.
	tr.round(ctx, 2)
	s.start(t)
	tr.round(ctx, 3)
	polled := stopPolling()
	t.Logf("the poller read endpoints %d times", polled)

	waitFor(t, "Sunset to count every round, the retried one included", 3*time.Minute, func() error {
		got := sunsetTally(t, s.list(t))
		for k, c := range roundCounts {
			if want := (counts{rounds * c.Requests, rounds * c.DryRuns}); got.byClient[k] != want {
				return fmt.Errorf("%+v: %+v, want %+v", k, got.byClient[k], want)
			}
		}
		return nil
	})

	// Stopping the apiserver flushes its audit buffers: after it exits,
	// its log is complete and nothing is in flight to Sunset.
	a.proc.stop(t, syscall.SIGTERM, 2*time.Minute)
	truth, lines := groundTruth(t, a.auditLog)
	t.Logf("audit log: %d events, %d APIs with deprecated requests", lines, len(truth.byAPI))

	// The ground truth holds the traffic the test made, or every comparison
	// below would pass on nothing.
	for k, c := range roundCounts {
		if want := (counts{rounds * c.Requests, rounds * c.DryRuns}); truth.byClient[k] != want {
			t.Errorf("audit log %+v: %+v, the test made %+v", k, truth.byClient[k], want)
		}
	}
	wantTotals := map[string]apiTotals{
		"volumeattributesclasses.v1beta1.storage.k8s.io": {RemovedInRelease: "1.37", Requests: rounds * 3,
			Nodes: []string{"e2e/apiserver-0"}, NonSystemUsers: []string{"carol"}},
		"cronjobs.v1beta1.batch": {RemovedInRelease: "1.25", Requests: rounds, AlreadyRemoved: rounds, Removed: true,
			Nodes: []string{"e2e/apiserver-0"}, NonSystemUsers: []string{"bob"}},
		"componentstatuses.v1": {Requests: rounds,
			Nodes: []string{"e2e/apiserver-0"}, NonSystemUsers: []string{"carol"}},
		"widgets.v1beta1.e2e.example.com": {Requests: rounds * 8, DryRuns: rounds,
			Nodes: []string{"e2e/apiserver-0"}, NonSystemUsers: []string{"alice"}},
	}
	for api, want := range wantTotals {
		if got := truth.byAPI[api]; !equalJSON(got, want) {
			t.Errorf("audit log %s: %+v, the test made %+v", api, got, want)
		}
	}
	endpoints := truth.byAPI["endpoints.v1"]
	if !slices.Equal(endpoints.SystemUsers, []string{"system:apiserver"}) || endpoints.System == 0 ||
		!slices.Equal(endpoints.NonSystemUsers, []string{"bob", legacyUsername}) {
		t.Errorf("audit log endpoints.v1: %+v; want system:apiserver's reads and bob's and %s's", endpoints, legacyUsername)
	}
	if want := []string{legacyPod + "@" + legacyNode}; !slices.Equal(truth.workloads[legacyUsername], want) {
		t.Errorf("audit log: pod-bound token of %s: %v, want %v", legacyUsername, truth.workloads[legacyUsername], want)
	}
	if t.Failed() {
		t.FailNow()
	}

	s.mustEqual(t, truth)
}

func randomToken(t *testing.T) string {
	return randomHex(t, 48)
}

// randomHex is n random hexadecimal digits, n even.
func randomHex(t *testing.T, n int) string {
	t.Helper()
	b := make([]byte, n/2)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}

// checkWebhookRefusesStrangers posts with each credential missing or
// wrong: Sunset demands both the token and a certificate from its CA.
func checkWebhookRefusesStrangers(t *testing.T, s *sunsetServer, p *pki, token string) {
	t.Helper()
	cert, key := p.issue(t, "stranger-client", nodeName, false)
	stranger := newPKI(t)
	otherCert, otherKey := stranger.issue(t, "other-ca-client", nodeName, false)
	withCert, withOtherCert := p.httpsClient(cert, key), p.httpsClient(otherCert, otherKey)
	for _, tc := range []struct {
		what   string
		client *http.Client
		token  string
		// A certificate from an unknown CA fails the TLS handshake, before
		// any HTTP answer.
		handshakeError string
	}{
		{"no credentials", s.client, "", ""},
		{"the token without a certificate", s.client, token, ""},
		{"a certificate without the token", withCert, "", ""},
		{"a certificate and a wrong token", withCert, "not-" + token, ""},
		{"the token and a certificate from another CA", withOtherCert, token, "tls: unknown certificate authority"},
	} {
		req, _ := http.NewRequest(http.MethodPost, s.url+"/audit/webhook/"+clusterName+"/"+nodeName,
			strings.NewReader(`{"kind":"EventList","apiVersion":"audit.k8s.io/v1","items":[]}`))
		req.Header.Set("Content-Type", "application/json")
		if tc.token != "" {
			req.Header.Set("Authorization", "Bearer "+tc.token)
		}
		resp, err := tc.client.Do(req)
		if tc.handshakeError != "" {
			if err == nil || !strings.Contains(err.Error(), tc.handshakeError) {
				t.Errorf("webhook POST with %s: %v, want %q", tc.what, err, tc.handshakeError)
			}
			if err == nil {
				resp.Body.Close()
			}
			continue
		}
		if err != nil {
			t.Fatalf("webhook POST with %s: %v", tc.what, err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("webhook POST with %s: %d, want 401", tc.what, resp.StatusCode)
		}
	}
}

// list reads every APIRequestCount with all users.
func (s *sunsetServer) list(t *testing.T) requestCountList {
	t.Helper()
	resp, err := s.client.Get(s.url + "/apis/sunset.dev/v1/apirequestcounts?users=100")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("listing apirequestcounts: %s", resp.Status)
	}
	var list requestCountList
	if err := json.NewDecoder(resp.Body).Decode(&list); err != nil {
		t.Fatal(err)
	}
	if list.Kind != "APIRequestCountList" {
		t.Fatalf("listing apirequestcounts: kind %q", list.Kind)
	}
	return list
}

func equalJSON(a, b any) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return string(x) == string(y)
}
