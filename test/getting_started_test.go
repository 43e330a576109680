package test

import (
	"bufio"
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kube-sunset/sunset/internal/testutil/lockedbuf"
)

// servedAddress is the listen address docs/getting-started.md shows; the
// test serves on a loopback port of its own instead.
const servedAddress = "10.0.0.20:8443"

// docBlock is the fenced block of a page whose info string is info.
func docBlock(t *testing.T, page, info string) string {
	t.Helper()
	raw, err := os.ReadFile(page)
	require.NoError(t, err)
	var found []string
	for _, m := range fence.FindAllStringSubmatch(string(raw), -1) {
		if strings.TrimSpace(m[1]) == info {
			found = append(found, m[2])
		}
	}
	require.Len(t, found, 1, "%s has one block ```%s", page, info)
	return found[0]
}

// The page's whole `sunset serve` beyond loopback runs as written: the
// lines that make its files, then serve, on a loopback port in place of
// the documented address (and so on a random port, read from the log). It
// serves HTTPS with the CA the page names; the webhook takes a batch
// with the token file's token and refuses one without; a reader with the
// token of readers.csv reads what was posted, and one without a token is
// answered 401.
func TestGettingStartedServesBeyondLoopback(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the binary")
	}
	block := docBlock(t, "../docs/getting-started.md", "sh serve-beyond-loopback")
	steps := parseSteps(t, block)
	require.GreaterOrEqual(t, len(steps), 2)
	serve := steps[len(steps)-1].command
	require.True(t, strings.HasPrefix(serve, "sunset serve "), "the block ends with sunset serve: %q", serve)
	require.Equal(t, 1, strings.Count(serve, "--listen="+servedAddress), "the block serves on %s", servedAddress)
	for _, s := range steps {
		require.Empty(t, s.want, "the block shows no output")
	}

	dir := t.TempDir()
	// The block is one shell, as a user types it: umask holds for the
	// lines after it, and serve replaces the shell so that killing it
	// stops the server.
	var script strings.Builder
	for _, s := range steps[:len(steps)-1] {
		script.WriteString(s.command + "\n")
	}
	script.WriteString("exec " + strings.Replace(serve, servedAddress, "127.0.0.1:0", 1) + "\n")
	cmd := exec.Command("bash", "-e", "-c", script.String())
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "PATH="+filepath.Dir(sunsetBin)+":"+os.Getenv("PATH"))
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	pr, pw := io.Pipe()
	cmd.Stdout, cmd.Stderr = pw, pw
	require.NoError(t, cmd.Start())
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait(); _ = pw.Close() }()
	t.Cleanup(func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-exited
	})
	logged := &lockedbuf.Buffer{}
	listen := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			logged.Write(append(sc.Bytes(), '\n'))
			var line struct{ Message, Listen string }
			if json.Unmarshal(sc.Bytes(), &line) == nil && line.Message == "sunset is serving" {
				listen <- line.Listen
			}
		}
	}()
	var addr, startup string
	select {
	case addr = <-listen:
		startup = logged.String()
	case err := <-exited:
		t.Fatalf("the page's sunset serve exited before serving: %v\n%s", err, logged)
	case <-time.After(30 * time.Second):
		t.Fatalf("the page's sunset serve did not serve within 30s:\n%s", logged)
	}

	// The files the page says it makes, with the modes umask gave them.
	for _, f := range []string{"webhook-token", "readers.csv", "certs/ca.crt", "certs/tls.crt", "certs/tls.key"} {
		info, err := os.Stat(filepath.Join(dir, f))
		require.NoError(t, err, f)
		require.Zero(t, info.Mode().Perm()&0o077, "%s is for its owner only", f)
	}
	webhookToken, err := os.ReadFile(filepath.Join(dir, "webhook-token"))
	require.NoError(t, err)
	require.Regexp(t, `^[A-Za-z0-9]{32,}$`, string(webhookToken))
	readers, err := os.ReadFile(filepath.Join(dir, "readers.csv"))
	require.NoError(t, err)
	require.Regexp(t, `^[A-Za-z0-9]{32,},alice,alice,"sunset:readers"\n$`, string(readers))
	readerToken, _, _ := strings.Cut(string(readers), ",")

	ca, err := os.ReadFile(filepath.Join(dir, "certs/ca.crt"))
	require.NoError(t, err)
	pool := x509.NewCertPool()
	require.True(t, pool.AppendCertsFromPEM(ca))
	client := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	base := "https://" + addr
	call := func(method, path, token string, body []byte) (int, string) {
		req, err := http.NewRequest(method, base+path, bytes.NewReader(body))
		require.NoError(t, err)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		if body != nil {
			req.Header.Set("Content-Type", "application/json")
		}
		resp, err := client.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		out, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		return resp.StatusCode, string(out)
	}

	now := time.Now().UTC().Format(time.RFC3339Nano)
	eventList := []byte(`{"kind":"EventList","apiVersion":"audit.k8s.io/v1","items":[{"level":"Metadata","auditID":"getting-started-1","stage":"ResponseComplete","verb":"list","user":{"username":"bob"},"userAgent":"bob-script/2.0","objectRef":{"resource":"widgets","apiGroup":"example.com","apiVersion":"v1beta1"},"requestReceivedTimestamp":"` + now + `","annotations":{"k8s.io/deprecated":"true"}}]}`)
	code, body := call(http.MethodPost, "/audit/webhook/master-0", "", eventList)
	require.Equal(t, http.StatusUnauthorized, code, "a batch without the token: %s", body)
	code, body = call(http.MethodPost, "/audit/webhook/master-0", string(webhookToken), eventList)
	require.Equal(t, http.StatusOK, code, "a batch with the token: %s", body)

	const counts = "/apis/sunset.dev/v1/apirequestcounts/widgets.v1beta1.example.com"
	code, body = call(http.MethodGet, counts, "", nil)
	require.Equal(t, http.StatusUnauthorized, code, "a read without a token: %s", body)
	code, body = call(http.MethodGet, counts, string(webhookToken), nil)
	require.Equal(t, http.StatusUnauthorized, code, "the webhook's token is no reader's: %s", body)
	code, body = call(http.MethodGet, counts, readerToken, nil)
	require.Equal(t, http.StatusOK, code, "a read with the reader's token: %s", body)
	var got struct {
		Status struct{ RequestCount int64 } `json:"status"`
	}
	require.NoError(t, json.Unmarshal([]byte(body), &got))
	require.Equal(t, int64(1), got.Status.RequestCount)
	require.NotRegexp(t, `"level":"(warn|error)"`, startup, "the page's serve starts without a warning")
}
