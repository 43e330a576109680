package admit

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/kube-sunset/sunset/gate"
)

// Reviews that cannot be read are answered with an AdmissionReview that
// says why, and counted as errors; the verdict is not asked.
func TestUnreadableReviews(t *testing.T) {
	reg := prometheus.NewRegistry()
	kinds, err := gate.NewKinds(nil)
	require.NoError(t, err)
	mux := http.NewServeMux()
	New(Options{Gate: gate.New(gate.Options{Registerer: reg}), Kinds: kinds, MaxBodyBytes: 1024}).Register(mux)
	srv := httptest.NewServer(mux)
	defer srv.Close()

	for _, tc := range []struct {
		body string
		code int
		msg  string
	}{
		{strings.Repeat(" ", 1025), 413, "the AdmissionReview is larger than 1024 bytes: send only objects that hold a Kubernetes version to this webhook"},
		{`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":`, 400, "the body is not an admission.k8s.io/v1 AdmissionReview in JSON: unexpected EOF"},
		{`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview"}`, 400, "the AdmissionReview has no request, or its request no uid: send an admission.k8s.io/v1 AdmissionReview as kube-apiserver does"},
		{`{"request":{"uid":"","operation":"UPDATE"}}`, 400, "the AdmissionReview has no request, or its request no uid: send an admission.k8s.io/v1 AdmissionReview as kube-apiserver does"},
	} {
		resp, err := http.Post(srv.URL+Path, "application/json", bytes.NewBufferString(tc.body))
		require.NoError(t, err)
		body, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		resp.Body.Close()
		require.Equal(t, tc.code, resp.StatusCode, string(body))
		want, err := json.Marshal(map[string]any{"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
			"response": map[string]any{"uid": "", "allowed": false, "status": map[string]any{"metadata": map[string]any{}, "status": "Failure", "message": tc.msg, "code": tc.code}}})
		require.NoError(t, err)
		require.JSONEq(t, string(want), string(body))
	}
	mfs, err := reg.Gather()
	require.NoError(t, err)
	for _, mf := range mfs {
		if mf.GetName() == "sunset_gate_reviews_total" {
			for _, m := range mf.GetMetric() {
				want := 0.0
				if m.GetLabel()[0].GetValue() == "error" && m.GetLabel()[1].GetValue() == "admission" {
					want = 4
				}
				require.Equal(t, want, m.GetCounter().GetValue(), m.String())
			}
		}
	}

	resp, err := http.Get(srv.URL + Path)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusMethodNotAllowed, resp.StatusCode)
}
