// Package client talks to a running Sunset server: it reads
// APIRequestCounts and sends audit events to the webhook. The CLI uses it for
// --server.
package client

import (
	"bytes"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	sunsetv1 "github.com/kube-sunset/sunset/api/v1"
	"github.com/kube-sunset/sunset/internal/httpjson"
	"github.com/kube-sunset/sunset/internal/tlsutil"
)

// Options configures New.
type Options struct {
	// Server is the base URL, e.g. http://localhost:8080.
	Server string
	// CAFile verifies the server's certificate.
	CAFile string
	// Token is sent as a bearer token, for proxies in front of Sunset.
	Token string
	// InsecureSkipVerify skips certificate verification.
	InsecureSkipVerify bool
	// Timeout bounds each request; zero means 60s.
	Timeout time.Duration
	// REST, when set, reaches Sunset through kube-apiserver, which serves
	// sunset.dev/v1 through its APIService, with the kubeconfig's
	// credentials; Server and the TLS options are then not used.
	REST *rest.Config
}

// Client is a Sunset HTTP client.
type Client struct {
	base  *url.URL
	http  *http.Client
	token string
}

// New checks the options and builds a client. It does not contact the
// server.
func New(o Options) (*Client, error) {
	if o.Timeout == 0 {
		o.Timeout = 60 * time.Second
	}
	if o.REST != nil {
		cfg := rest.CopyConfig(o.REST)
		cfg.Timeout = o.Timeout
		hc, err := rest.HTTPClientFor(cfg)
		if err != nil {
			return nil, fmt.Errorf("kubeconfig: %w", err)
		}
		u, err := url.Parse(cfg.Host)
		if err != nil || u.Host == "" {
			return nil, fmt.Errorf("kubeconfig: server %q is not a URL", cfg.Host)
		}
		if u.Scheme == "" {
			u.Scheme = "https"
		}
		return &Client{base: u, http: hc}, nil
	}
	u, err := url.Parse(o.Server)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("--server %q is not an http:// or https:// URL", o.Server)
	}
	tlsCfg := &tls.Config{InsecureSkipVerify: o.InsecureSkipVerify} //nolint:gosec // the user asked for it
	if o.CAFile != "" {
		pool, err := tlsutil.LoadCertPool(o.CAFile)
		if err != nil {
			return nil, fmt.Errorf("reading --certificate-authority: %w", err)
		}
		tlsCfg.RootCAs = pool
	}
	tr := &http.Transport{TLSClientConfig: tlsCfg, ForceAttemptHTTP2: true, Proxy: http.ProxyFromEnvironment}
	return &Client{base: u, http: &http.Client{Transport: tr, Timeout: o.Timeout}, token: o.Token}, nil
}

// List reads APIRequestCounts.
func (c *Client) List(q sunsetv1.Query) (sunsetv1.APIRequestCountList, error) {
	return get[sunsetv1.APIRequestCountList](c, "/apis/sunset.dev/v1/apirequestcounts", q.Values())
}

// Get reads one APIRequestCount; sunsetv1.ErrNotFound if the server has none.
func (c *Client) Get(name string, q sunsetv1.Query) (sunsetv1.APIRequestCount, error) {
	v := q.Values()
	for _, listOnly := range []string{"removedRelease", "removedBefore", "state", "user"} {
		v.Del(listOnly)
	}
	return get[sunsetv1.APIRequestCount](c, "/apis/sunset.dev/v1/apirequestcounts/"+url.PathEscape(name), v)
}

// Info reads what the server can answer: its retention, clusters and
// clock.
func (c *Client) Info() (sunsetv1.ServerInfo, error) {
	return get[sunsetv1.ServerInfo](c, "/apis/sunset.dev/v1/serverinfo", nil)
}

// PostEvents sends an EventList body to a webhook path such as
// /audit/webhook/prod/master-0 and returns the response body. With dryRun
// the server classifies without storing.
func (c *Client) PostEvents(path string, body []byte, dryRun bool) ([]byte, error) {
	u := c.base.JoinPath(path)
	if dryRun {
		u.RawQuery = "dryRun=All"
	}
	req, err := http.NewRequest(http.MethodPost, u.String(), bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	return c.do(req)
}

// get reads path's JSON answer as a T.
func get[T any](c *Client, path string, v url.Values) (T, error) {
	var out T
	u := c.base.JoinPath(path)
	u.RawQuery = v.Encode()
	req, err := http.NewRequest(http.MethodGet, u.String(), nil)
	if err != nil {
		return out, err
	}
	body, err := c.do(req)
	if err != nil {
		return out, err
	}
	if err := json.Unmarshal(body, &out); err != nil {
		return out, fmt.Errorf("%s answered something that is not Sunset's JSON for %s: %w", c.base, path, err)
	}
	return out, nil
}

// StatusError is an error answer from the server.
type StatusError struct {
	Code    int
	Message string
}

func (e *StatusError) Error() string { return fmt.Sprintf("server answered %d: %s", e.Code, e.Message) }

func (c *Client) do(req *http.Request) ([]byte, error) {
	req.Header.Set("Accept", "application/json")
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, fmt.Errorf("cannot reach Sunset at %s (is `sunset serve` running there? or read a data directory with --data-dir): %w", c.base, err)
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 256<<20))
	if err != nil {
		return nil, fmt.Errorf("reading the answer of %s: %w", c.base, err)
	}
	if resp.StatusCode/100 == 2 {
		return body, nil
	}
	var st metav1.Status
	msg := strings.TrimSpace(string(body))
	if json.Unmarshal(body, &st) == nil && st.Message != "" {
		msg = st.Message
	}
	if resp.StatusCode == http.StatusNotFound && st.Reason == httpjson.ReasonNotFound {
		return nil, fmt.Errorf("%w: %s", sunsetv1.ErrNotFound, msg)
	}
	return nil, &StatusError{Code: resp.StatusCode, Message: msg}
}
