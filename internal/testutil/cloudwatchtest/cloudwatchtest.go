// Package cloudwatchtest runs a real CloudWatch Logs API for tests: moto's
// server (moto_server), on a free loopback port, for one test. Clients
// talk to it with the real aws-sdk-go-v2 through a small proxy in front of
// it, which can answer chosen calls with the errors AWS gives (throttling,
// access denied) that moto never gives.
//
// Start it once per test. Sources, or the sunset binary (with Env), can
// then be started, stopped and started again against the same Server:
// moto keeps the log groups and events in memory until the test ends,
// when the server is killed.
//
// moto differs from CloudWatch Logs in ways a reader must survive: it
// ignores logStreamNamePrefix, its event IDs are small integers, and
// FilterLogEvents orders events stream by stream rather than by time. It
// does enforce PutLogEvents' time window (no older than 14 days, no more
// than 2 hours ahead) against the real clock, so tests give events
// CloudWatch times near time.Now(), whatever the times in their messages;
// Put fails a test that gives it one outside the window.
//
// It is for tests only; production code must not import it.
package cloudwatchtest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os/exec"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/cloudwatchlogs"
)

// The static credentials and region clients use. moto accepts any.
const (
	Region          = "us-east-1"
	AccessKeyID     = "AKIDCLOUDWATCHTEST"
	SecretAccessKey = "cloudwatchtest-secret"
)

// startTimeout bounds how long moto_server may take to answer; it takes
// one to three seconds on a quiet machine.
const startTimeout = 60 * time.Second

// Server is a running moto_server and the proxy in front of it.
type Server struct {
	// URL is the endpoint clients use (aws.Config.BaseEndpoint, the
	// endpoint key of Sunset's config): the proxy.
	URL string
	// MotoURL is moto_server itself, bypassing the faults.
	MotoURL string

	faults *faults
	client *cloudwatchlogs.Client
}

// Start runs moto_server for the test t and returns once it answers. It
// fails t, loudly, when moto_server is not installed: a test that needs
// CloudWatch Logs must not pass without it. The server and the proxy stop
// when t ends.
func Start(t testing.TB) *Server {
	t.Helper()
	bin, err := exec.LookPath("moto_server")
	if err != nil {
		t.Fatalf("cloudwatchtest: moto_server is not on PATH (%v); install it with `pip install 'moto[server]'` (moto 5), or put pyenv's shims on PATH", err)
	}
	var motoURL string
	for attempt := 1; ; attempt++ {
		u, err := startMoto(t, bin)
		if err == nil {
			motoURL = u
			break
		}
		// The free port found may be taken before moto binds it.
		if attempt == 3 {
			t.Fatalf("cloudwatchtest: %v", err)
		}
		t.Logf("cloudwatchtest: %v; trying another port", err)
	}
	target, err := url.Parse(motoURL)
	if err != nil {
		t.Fatal(err)
	}
	s := &Server{MotoURL: motoURL, faults: &faults{calls: map[string]int{}, pending: map[string][]Fault{}, always: map[string]Fault{}}}
	proxy := httptest.NewServer(s.faults.wrap(httputil.NewSingleHostReverseProxy(target)))
	t.Cleanup(proxy.Close)
	s.URL = proxy.URL
	s.client = cloudwatchlogs.NewFromConfig(s.Config())
	return s
}

// startMoto starts moto_server on a free port and waits until it answers.
func startMoto(t testing.TB, bin string) (string, error) {
	port, err := freePort()
	if err != nil {
		return "", err
	}
	cmd := exec.Command(bin, "-H", "127.0.0.1", "-p", strconv.Itoa(port))
	// Its own process group: pyenv's shim may leave python as a child,
	// and the whole group is killed at cleanup.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	out := &tail{max: 16 << 10}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		return "", fmt.Errorf("starting moto_server: %w", err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	stop := func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-exited
	}
	u := "http://127.0.0.1:" + strconv.Itoa(port)
	if err := waitAnswers(u, exited); err != nil {
		stop()
		return "", fmt.Errorf("moto_server on port %d: %w; its output:\n%s", port, err, out.String())
	}
	t.Cleanup(stop)
	return u, nil
}

// waitAnswers polls moto's own API until it answers, the process exits or
// startTimeout passes.
func waitAnswers(u string, exited <-chan struct{}) error {
	c := &http.Client{Timeout: 2 * time.Second}
	deadline := time.Now().Add(startTimeout)
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		resp, err := c.Get(u + "/moto-api/")
		if err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-exited:
			return errors.New("exited before answering")
		case <-tick.C:
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("no answer within %s", startTimeout)
		}
	}
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer func() { _ = l.Close() }()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// Config is an aws.Config for the server: the region, static credentials
// and BaseEndpoint URL. Each call returns a new one, so a test can build
// as many clients, or restarted sources, as it likes.
func (s *Server) Config() aws.Config {
	return aws.Config{
		Region:       Region,
		Credentials:  credentials.NewStaticCredentialsProvider(AccessKeyID, SecretAccessKey, ""),
		BaseEndpoint: aws.String(s.URL),
	}
}

// Env is the environment a child process (the sunset binary) needs for the
// SDK's default chain to reach the server with the static credentials:
// append it to os.Environ(). Instance metadata is turned off so that the
// chain does not wait for an EC2 endpoint that is not there.
func (s *Server) Env() []string {
	return []string{
		"AWS_ACCESS_KEY_ID=" + AccessKeyID,
		"AWS_SECRET_ACCESS_KEY=" + SecretAccessKey,
		"AWS_REGION=" + Region,
		"AWS_ENDPOINT_URL_CLOUDWATCH_LOGS=" + s.URL,
		"AWS_EC2_METADATA_DISABLED=true",
	}
}

// Client is a CloudWatch Logs client of the server, for a test's setup.
func (s *Server) Client() *cloudwatchlogs.Client { return s.client }

// ctx bounds each setup call.
func ctx(t testing.TB) (context.Context, context.CancelFunc) {
	return context.WithTimeout(t.Context(), 30*time.Second)
}

// tail keeps the last max bytes written to it: moto logs every request.
type tail struct {
	mu  sync.Mutex
	max int
	buf []byte
}

func (w *tail) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf = append(w.buf, p...)
	if over := len(w.buf) - w.max; over > 0 {
		w.buf = bytes.Clone(w.buf[over:])
	}
	return len(p), nil
}

func (w *tail) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return string(w.buf)
}
