package client

import (
	"encoding/pem"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"k8s.io/client-go/rest"

	"github.com/kube-sunset/sunset/admission"
	sunsetv1 "github.com/kube-sunset/sunset/api/v1"
	"github.com/kube-sunset/sunset/catalog"
	"github.com/kube-sunset/sunset/internal/httpjson"
	"github.com/kube-sunset/sunset/internal/testutil/loopback"
)

// heard is one request as the server received it.
type heard struct {
	Method, Path, Query          string
	Accept, Authorization, CType string
	Body                         string
}

// recorder is a real HTTP server on a loopback port that notes every
// request and answers each with answer.
type recorder struct {
	mu     sync.Mutex
	heard  []heard
	answer http.HandlerFunc
}

func (rec *recorder) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	rec.mu.Lock()
	rec.heard = append(rec.heard, heard{Method: r.Method, Path: r.URL.EscapedPath(), Query: r.URL.RawQuery,
		Accept: r.Header.Get("Accept"), Authorization: r.Header.Get("Authorization"), CType: r.Header.Get("Content-Type"), Body: string(body)})
	answer := rec.answer
	rec.mu.Unlock()
	answer(w, r)
}

// setAnswer changes how the server answers from the next request on.
func (rec *recorder) setAnswer(answer http.HandlerFunc) {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	rec.answer = answer
}

// take returns what the server heard since the last call.
func (rec *recorder) take() []heard {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	h := rec.heard
	rec.heard = nil
	return h
}

func startRecorder(t *testing.T, answer http.HandlerFunc) (*recorder, *httptest.Server) {
	t.Helper()
	rec := &recorder{answer: answer}
	srv := httptest.NewServer(rec)
	t.Cleanup(srv.Close)
	return rec, srv
}

func answerJSON(body string) http.HandlerFunc {
	return func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, body)
	}
}

// Each read goes to its path with the query's parameters, defaults left
// out; Get drops the parameters only a list takes; names are escaped; a
// base URL's path is kept in front.
func TestRequestsPathsAndQueries(t *testing.T) {
	rec, srv := startRecorder(t, answerJSON(`{}`))
	c, err := New(Options{Server: srv.URL + "/sunset"})
	require.NoError(t, err)

	q := sunsetv1.Query{Users: 25, Cluster: "prod", RemovedIn: catalog.MustParseRelease("1.37"), RemovedBefore: catalog.MustParseRelease("1.40"),
		State: sunsetv1.StateRemoved, Since: 48 * time.Hour, User: "bob", Hourly: true}
	_, err = c.List(q)
	require.NoError(t, err)
	_, err = c.List(sunsetv1.DefaultQuery())
	require.NoError(t, err)
	_, err = c.Get("cronjobs.v1beta1.batch", q)
	require.NoError(t, err)
	_, err = c.Get("a/b c", sunsetv1.Query{})
	require.NoError(t, err)
	_, err = c.Info()
	require.NoError(t, err)
	_, err = c.Webhooks(sunsetv1.WebhookQuery{Cluster: "prod", Since: 2 * time.Hour, Class: admission.Security})
	require.NoError(t, err)
	_, err = c.Webhook("validating/policy/check.example.com", sunsetv1.WebhookQuery{})
	require.NoError(t, err)

	get := func(path, query string) heard {
		return heard{Method: http.MethodGet, Path: path, Query: query, Accept: "application/json"}
	}
	require.Equal(t, []heard{
		get("/sunset/apis/sunset.dev/v1/apirequestcounts", "cluster=prod&hourly=true&removedBefore=1.40&removedRelease=1.37&since=48h0m0s&state=removed&user=bob&users=25"),
		get("/sunset/apis/sunset.dev/v1/apirequestcounts", ""),
		get("/sunset/apis/sunset.dev/v1/apirequestcounts/cronjobs.v1beta1.batch", "cluster=prod&hourly=true&since=48h0m0s&users=25"),
		get("/sunset/apis/sunset.dev/v1/apirequestcounts/a%2Fb%20c", ""),
		get("/sunset/apis/sunset.dev/v1/serverinfo", ""),
		get("/sunset/apis/sunset.dev/v1/webhookcounts", "class=security&cluster=prod&since=2h0m0s"),
		get("/sunset/apis/sunset.dev/v1/webhookcounts/validating%2Fpolicy%2Fcheck.example.com", ""),
	}, rec.take())
}

// PostEvents posts the body unchanged as JSON, with dryRun=All for a dry
// run, and returns the answer's body as it is.
func TestPostEvents(t *testing.T) {
	rec, srv := startRecorder(t, answerJSON(`{"counted":1}`))
	c, err := New(Options{Server: srv.URL})
	require.NoError(t, err)
	body := `{"kind":"EventList","apiVersion":"audit.k8s.io/v1","items":[]}`
	for _, dryRun := range []bool{false, true} {
		got, err := c.PostEvents("/audit/webhook/prod/master-0", []byte(body), dryRun)
		require.NoError(t, err)
		require.Equal(t, `{"counted":1}`, string(got))
	}
	require.Equal(t, []heard{
		{Method: http.MethodPost, Path: "/audit/webhook/prod/master-0", Accept: "application/json", CType: "application/json", Body: body},
		{Method: http.MethodPost, Path: "/audit/webhook/prod/master-0", Query: "dryRun=All", Accept: "application/json", CType: "application/json", Body: body},
	}, rec.take())

	// The webhook's answer is the caller's to read: a body that is not
	// JSON comes back as it is.
	rec.setAnswer(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok") })
	got, err := c.PostEvents("/audit/webhook/prod/master-0", []byte(body), false)
	require.NoError(t, err)
	require.Equal(t, "ok", string(got))
}

// --token goes as a bearer token on every request, and only when given.
func TestBearerToken(t *testing.T) {
	rec, srv := startRecorder(t, answerJSON(`{}`))
	with, err := New(Options{Server: srv.URL, Token: "s3cret"})
	require.NoError(t, err)
	_, err = with.Info()
	require.NoError(t, err)
	_, err = with.PostEvents("/audit/webhook/n", []byte(`{}`), false)
	require.NoError(t, err)
	without, err := New(Options{Server: srv.URL})
	require.NoError(t, err)
	_, err = without.Info()
	require.NoError(t, err)

	var auth []string
	for _, h := range rec.take() {
		auth = append(auth, h.Authorization)
	}
	require.Equal(t, []string{"Bearer s3cret", "Bearer s3cret", ""}, auth)
}

// A non-2xx answer becomes an error with the server's own message: from
// its Status envelope, else its body; Sunset's 404 Status for an API
// without counts is sunsetv1.ErrNotFound.
func TestErrorAnswers(t *testing.T) {
	for _, tc := range []struct {
		name   string
		answer http.HandlerFunc
		code   int
		msg    string
	}{
		{"Status envelope", func(w http.ResponseWriter, _ *http.Request) {
			httpjson.Error(w, http.StatusBadRequest, httpjson.ReasonBadRequest, `since "1m" is not a duration of at least 1h, such as 24h or 168h`)
		}, 400, `since "1m" is not a duration of at least 1h, such as 24h or 168h`},
		{"Status envelope of a proxy", func(w http.ResponseWriter, _ *http.Request) {
			httpjson.Error(w, http.StatusUnauthorized, httpjson.ReasonUnauthorized, "Unauthorized")
		}, 401, "Unauthorized"},
		{"a 404 that is not Sunset's", http.NotFound, 404, "404 page not found"},
		{"not JSON", func(w http.ResponseWriter, _ *http.Request) {
			w.WriteHeader(http.StatusBadGateway)
			_, _ = io.WriteString(w, "  upstream connect error\n")
		}, 502, "upstream connect error"},
		{"JSON without a message", func(w http.ResponseWriter, _ *http.Request) {
			w.WriteHeader(http.StatusInternalServerError)
			_, _ = io.WriteString(w, `{"kind":"Status","code":500}`)
		}, 500, `{"kind":"Status","code":500}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, srv := startRecorder(t, tc.answer)
			c, err := New(Options{Server: srv.URL})
			require.NoError(t, err)
			_, err = c.List(sunsetv1.DefaultQuery())
			var status *StatusError
			require.ErrorAs(t, err, &status)
			require.Equal(t, &StatusError{Code: tc.code, Message: tc.msg}, status)
			require.EqualError(t, err, fmt.Sprintf("server answered %d: %s", tc.code, tc.msg))
			require.NotErrorIs(t, err, sunsetv1.ErrNotFound)
			// The webhook's errors are read alike.
			_, err = c.PostEvents("/audit/webhook/n", []byte(`{}`), false)
			require.Equal(t, &StatusError{Code: tc.code, Message: tc.msg}, err)
		})
	}

	_, srv := startRecorder(t, func(w http.ResponseWriter, _ *http.Request) {
		httpjson.Error(w, http.StatusNotFound, httpjson.ReasonNotFound, "no deprecated requests to endpoints.v1 were recorded")
	})
	c, err := New(Options{Server: srv.URL})
	require.NoError(t, err)
	_, err = c.Get("endpoints.v1", sunsetv1.DefaultQuery())
	require.ErrorIs(t, err, sunsetv1.ErrNotFound)
	require.EqualError(t, err, "api: not found: no deprecated requests to endpoints.v1 were recorded")
}

// A 2xx answer that is not Sunset's JSON says who answered and for what.
func TestAnswerThatIsNotJSON(t *testing.T) {
	_, srv := startRecorder(t, func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		_, _ = io.WriteString(w, "<html>login</html>")
	})
	c, err := New(Options{Server: srv.URL})
	require.NoError(t, err)
	_, err = c.List(sunsetv1.DefaultQuery())
	require.EqualError(t, err, srv.URL+" answered something that is not Sunset's JSON for /apis/sunset.dev/v1/apirequestcounts: invalid character '<' looking for beginning of value")
	_, err = c.Info()
	require.EqualError(t, err, srv.URL+" answered something that is not Sunset's JSON for /apis/sunset.dev/v1/serverinfo: invalid character '<' looking for beginning of value")
}

// A server that does not answer: the error says what Sunset expected there
// and what to do instead, then the transport's own error.
func TestConnectionRefused(t *testing.T) {
	base := "http://" + loopback.FreeAddr(t)
	c, err := New(Options{Server: base})
	require.NoError(t, err)
	_, err = c.Info()
	require.ErrorIs(t, err, syscall.ECONNREFUSED)
	require.EqualError(t, err, "cannot reach Sunset at "+base+" (is `sunset serve` running there? or read a data directory with --data-dir): "+
		`Get "`+base+`/apis/sunset.dev/v1/serverinfo": dial tcp `+base[len("http://"):]+": connect: connection refused")
	_, err = c.PostEvents("/audit/webhook/n", []byte(`{}`), true)
	require.EqualError(t, err, "cannot reach Sunset at "+base+" (is `sunset serve` running there? or read a data directory with --data-dir): "+
		`Post "`+base+`/audit/webhook/n?dryRun=All": dial tcp `+base[len("http://"):]+": connect: connection refused")
}

// Timeout bounds each request; zero means 60s.
func TestTimeout(t *testing.T) {
	c, err := New(Options{Server: "http://localhost:8080"})
	require.NoError(t, err)
	require.Equal(t, 60*time.Second, c.http.Timeout)

	// The server answers once the client gives up or, should the client
	// wait that long, after 5 s: a timeout that was not applied shows as
	// no error rather than as a minute's wait.
	release := make(chan struct{})
	_, srv := startRecorder(t, func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-release:
		case <-time.After(5 * time.Second):
			_, _ = io.WriteString(w, `{}`)
		}
	})
	defer close(release)
	c, err = New(Options{Server: srv.URL, Timeout: 50 * time.Millisecond})
	require.NoError(t, err)
	_, err = c.Info()
	require.EqualError(t, err, "cannot reach Sunset at "+srv.URL+" (is `sunset serve` running there? or read a data directory with --data-dir): "+
		`Get "`+srv.URL+`/apis/sunset.dev/v1/serverinfo": context deadline exceeded (Client.Timeout exceeded while awaiting headers)`)
}

func TestNewRefusesBadOptions(t *testing.T) {
	dir := t.TempDir()
	notPEM := filepath.Join(dir, "ca.crt")
	require.NoError(t, os.WriteFile(notPEM, []byte("not a certificate"), 0o600))
	for _, tc := range []struct {
		o   Options
		err string
	}{
		{Options{Server: "localhost:8080"}, `--server "localhost:8080" is not an http:// or https:// URL`},
		{Options{Server: "ftp://sunset:21"}, `--server "ftp://sunset:21" is not an http:// or https:// URL`},
		{Options{Server: "http://"}, `--server "http://" is not an http:// or https:// URL`},
		{Options{Server: ""}, `--server "" is not an http:// or https:// URL`},
		{Options{Server: "http://a b"}, `--server "http://a b" is not an http:// or https:// URL`},
		{Options{Server: "https://sunset", CAFile: filepath.Join(dir, "missing.crt")}, "reading --certificate-authority: open " + filepath.Join(dir, "missing.crt") + ": no such file or directory"},
		{Options{Server: "https://sunset", CAFile: notPEM}, "reading --certificate-authority: " + notPEM + " holds no PEM certificate"},
		{Options{REST: &rest.Config{Host: "127.0.0.1:6443"}}, `kubeconfig: server "127.0.0.1:6443" is not a URL`},
		{Options{REST: &rest.Config{Host: "https://k8s", TLSClientConfig: rest.TLSClientConfig{CAFile: filepath.Join(dir, "missing.crt")}}},
			"kubeconfig: open " + filepath.Join(dir, "missing.crt") + ": no such file or directory"},
	} {
		_, err := New(tc.o)
		require.EqualError(t, err, tc.err, "%+v", tc.o)
	}
}

// An https:// server is verified with --certificate-authority, or not at
// all with InsecureSkipVerify; without either, its certificate is refused.
func TestTLS(t *testing.T) {
	srv := httptest.NewUnstartedServer(answerJSON(`{"retention":"720h0m0s"}`))
	// The refused handshake below is expected: keep it out of the log.
	srv.Config.ErrorLog = log.New(io.Discard, "", 0)
	srv.StartTLS()
	t.Cleanup(srv.Close)
	caFile := filepath.Join(t.TempDir(), "ca.crt")
	require.NoError(t, os.WriteFile(caFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}), 0o600))

	for _, o := range []Options{{Server: srv.URL, CAFile: caFile}, {Server: srv.URL, InsecureSkipVerify: true}} {
		c, err := New(o)
		require.NoError(t, err)
		_, err = c.Info()
		require.NoError(t, err, "%+v", o)
	}
	c, err := New(Options{Server: srv.URL})
	require.NoError(t, err)
	_, err = c.Info()
	require.EqualError(t, err, "cannot reach Sunset at "+srv.URL+" (is `sunset serve` running there? or read a data directory with --data-dir): "+
		`Get "`+srv.URL+`/apis/sunset.dev/v1/serverinfo": tls: failed to verify certificate: x509: certificate signed by unknown authority`)
}

// Through kube-apiserver, the kubeconfig's host, CA and credentials are
// used; --server's token is not.
func TestThroughKubeconfig(t *testing.T) {
	rec := &recorder{answer: answerJSON(`{}`)}
	srv := httptest.NewTLSServer(rec)
	t.Cleanup(srv.Close)
	ca := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
	c, err := New(Options{Server: "http://ignored", Token: "ignored", REST: &rest.Config{Host: srv.URL + "/k8s", BearerToken: "kube-token",
		TLSClientConfig: rest.TLSClientConfig{CAData: ca}}})
	require.NoError(t, err)
	_, err = c.List(sunsetv1.Query{Cluster: "prod"})
	require.NoError(t, err)
	got := rec.take()
	require.Len(t, got, 1)
	require.Equal(t, heard{Method: http.MethodGet, Path: "/k8s/apis/sunset.dev/v1/apirequestcounts", Query: "cluster=prod",
		Accept: "application/json", Authorization: "Bearer kube-token"}, got[0])

	// A host without a scheme, as kubeconfigs may hold, is https.
	c, err = New(Options{REST: &rest.Config{Host: "//" + srv.Listener.Addr().String(), BearerToken: "kube-token",
		TLSClientConfig: rest.TLSClientConfig{CAData: ca}}})
	require.NoError(t, err)
	_, err = c.Info()
	require.NoError(t, err)
	require.Equal(t, "/apis/sunset.dev/v1/serverinfo", rec.take()[0].Path)
}
