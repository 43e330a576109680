package web_test

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// browser is headless Chromium driven over the DevTools protocol through
// --remote-debugging-pipe: JSON messages separated by NUL bytes, written to
// its fd 3 and read from its fd 4. No websocket, no library.
type browser struct {
	t       *testing.T
	cmd     *exec.Cmd
	toPipe  io.WriteCloser
	mu      sync.Mutex
	nextID  int64
	pending map[int64]chan cdpMessage
	// logs are the page's console errors, exceptions and error log
	// entries, as Chromium reports them.
	logs   []string
	closed chan struct{}
	stderr bytes.Buffer
	// events receives a token at each event Chromium sends, without
	// waiting: a page's error, a new document, a load.
	events chan struct{}
}

// awaitEvent returns once Chromium sends an event or the deadline passes,
// reporting which.
func (b *browser) awaitEvent(deadline <-chan time.Time) bool {
	select {
	case <-b.events:
		return true
	case <-b.closed:
		return false
	case <-deadline:
		return false
	}
}

type cdpMessage struct {
	ID        int64           `json:"id,omitempty"`
	SessionID string          `json:"sessionId,omitempty"`
	Method    string          `json:"method,omitempty"`
	Params    json.RawMessage `json:"params,omitempty"`
	Result    json.RawMessage `json:"result,omitempty"`
	Error     *struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	} `json:"error,omitempty"`
}

// findChromium returns Debian's chromium (or $CHROMIUM), or skips.
func findChromium(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("CHROMIUM"); p != "" {
		return p
	}
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	t.Skip("chromium is not installed, so the page's browser test cannot run: apt-get install chromium (.ci/run does), or set CHROMIUM to its path")
	return ""
}

func startBrowser(t *testing.T) *browser {
	t.Helper()
	path := findChromium(t)
	// fd 3 is what Chromium reads, fd 4 what it writes.
	inR, inW, err := os.Pipe()
	require.NoError(t, err)
	outR, outW, err := os.Pipe()
	require.NoError(t, err)
	cmd := exec.Command(path, "--headless", "--remote-debugging-pipe", "--no-sandbox", "--disable-gpu",
		"--disable-dev-shm-usage", "--no-first-run", "--no-default-browser-check", "--disable-extensions",
		"--disable-background-networking", "--disable-sync", "--hide-scrollbars", "--mute-audio",
		"--user-data-dir="+t.TempDir(), "about:blank")
	cmd.ExtraFiles = []*os.File{inR, outW}
	b := &browser{t: t, cmd: cmd, toPipe: inW, pending: map[int64]chan cdpMessage{}, closed: make(chan struct{}), events: make(chan struct{}, 1)}
	cmd.Stderr = &lockedWriter{mu: &b.mu, w: &b.stderr}
	require.NoError(t, cmd.Start(), "starting %s", path)
	_ = inR.Close()
	_ = outW.Close()
	go b.read(outR)
	t.Cleanup(b.close)
	return b
}

// lockedWriter guards the stderr buffer, which Chromium writes while the
// test may read it.
type lockedWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

func (b *browser) read(r io.Reader) {
	defer close(b.closed)
	br := bufio.NewReaderSize(r, 1<<20)
	for {
		raw, err := br.ReadBytes(0)
		if err != nil {
			return
		}
		var m cdpMessage
		if json.Unmarshal(raw[:len(raw)-1], &m) != nil {
			continue
		}
		b.mu.Lock()
		if m.ID != 0 {
			if ch := b.pending[m.ID]; ch != nil {
				delete(b.pending, m.ID)
				ch <- m
			}
		} else {
			b.event(m)
		}
		b.mu.Unlock()
		if m.ID == 0 {
			select {
			case b.events <- struct{}{}:
			default:
			}
		}
	}
}

// event records what the page reports as going wrong. Called with mu held.
func (b *browser) event(m cdpMessage) {
	switch m.Method {
	case "Runtime.consoleAPICalled":
		var p struct {
			Type string `json:"type"`
			Args []struct {
				Value       any    `json:"value"`
				Description string `json:"description"`
			} `json:"args"`
		}
		_ = json.Unmarshal(m.Params, &p)
		if p.Type == "error" || p.Type == "assert" {
			var parts []string
			for _, a := range p.Args {
				parts = append(parts, fmt.Sprint(a.Value)+a.Description)
			}
			b.logs = append(b.logs, "console."+p.Type+": "+strings.Join(parts, " "))
		}
	case "Runtime.exceptionThrown":
		var p struct {
			ExceptionDetails struct {
				Text      string `json:"text"`
				Exception struct {
					Description string `json:"description"`
				} `json:"exception"`
			} `json:"exceptionDetails"`
		}
		_ = json.Unmarshal(m.Params, &p)
		b.logs = append(b.logs, "exception: "+p.ExceptionDetails.Text+" "+p.ExceptionDetails.Exception.Description)
	case "Log.entryAdded":
		var p struct {
			Entry struct {
				Level  string `json:"level"`
				Source string `json:"source"`
				Text   string `json:"text"`
				URL    string `json:"url"`
			} `json:"entry"`
		}
		_ = json.Unmarshal(m.Params, &p)
		if p.Entry.Level == "error" {
			b.logs = append(b.logs, fmt.Sprintf("log %s: %s %s", p.Entry.Source, p.Entry.Text, p.Entry.URL))
		}
	}
}

// errors returns and forgets what the page reported so far.
func (b *browser) errors() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := b.logs
	b.logs = nil
	return out
}

// call sends one command and decodes its result into out (if not nil).
func (b *browser) call(session, method string, params, out any) error {
	b.mu.Lock()
	b.nextID++
	id := b.nextID
	ch := make(chan cdpMessage, 1)
	b.pending[id] = ch
	b.mu.Unlock()
	msg, err := json.Marshal(cdpMessage{ID: id, SessionID: session, Method: method, Params: mustJSON(params)})
	if err != nil {
		return err
	}
	if _, err := b.toPipe.Write(append(msg, 0)); err != nil {
		return fmt.Errorf("%s: %w", method, err)
	}
	select {
	case m := <-ch:
		if m.Error != nil {
			return fmt.Errorf("%s: %s", method, m.Error.Message)
		}
		if out != nil {
			return json.Unmarshal(m.Result, out)
		}
		return nil
	case <-b.closed:
		return fmt.Errorf("%s: chromium exited:\n%s", method, b.stderrText())
	case <-time.After(60 * time.Second):
		return fmt.Errorf("%s: no answer from chromium within a minute", method)
	}
}

func (b *browser) stderrText() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.stderr.String()
}

func mustJSON(v any) json.RawMessage {
	if v == nil {
		return nil
	}
	raw, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return raw
}

func (b *browser) close() {
	// Browser.close ends Chromium and its helper processes cleanly.
	_ = b.call("", "Browser.close", nil, nil)
	_ = b.toPipe.Close()
	done := make(chan error, 1)
	go func() { done <- b.cmd.Wait() }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		_ = b.cmd.Process.Kill()
		<-done
	}
}

// tab is one page, its own DevTools session.
type tab struct {
	b       *browser
	session string
}

// newTab opens a page of the given size and colour scheme.
func (b *browser) newTab(width, height int, scheme string, mobile bool) *tab {
	b.t.Helper()
	var target struct {
		TargetID string `json:"targetId"`
	}
	require.NoError(b.t, b.call("", "Target.createTarget", map[string]any{"url": "about:blank"}, &target))
	var attached struct {
		SessionID string `json:"sessionId"`
	}
	require.NoError(b.t, b.call("", "Target.attachToTarget", map[string]any{"targetId": target.TargetID, "flatten": true}, &attached))
	tb := &tab{b: b, session: attached.SessionID}
	for _, m := range []string{"Runtime.enable", "Log.enable", "Page.enable"} {
		require.NoError(b.t, b.call(tb.session, m, nil, nil))
	}
	require.NoError(b.t, b.call(tb.session, "Emulation.setDeviceMetricsOverride",
		map[string]any{"width": width, "height": height, "deviceScaleFactor": 1, "mobile": mobile}, nil))
	require.NoError(b.t, b.call(tb.session, "Emulation.setEmulatedMedia",
		map[string]any{"features": []map[string]string{{"name": "prefers-color-scheme", "value": scheme}}}, nil))
	return tb
}

// open navigates and waits until the page says it has drawn what the API
// answered (html[data-state]), and returns that state.
func (tb *tab) open(url string, until ...string) string {
	tb.b.t.Helper()
	require.NoError(tb.b.t, tb.b.call(tb.session, "Page.navigate", map[string]any{"url": url}, nil))
	return tb.waitState(until...)
}

// waitState waits until the page's state is one of want (default ready
// or error): a promise in the page resolves when html[data-state] changes
// to one of them, or with the state it has after 30 s. A navigation that
// replaces the document on the way fails the evaluation; it is asked again
// once Chromium reports an event, the new document's among them.
func (tb *tab) waitState(want ...string) string {
	tb.b.t.Helper()
	if len(want) == 0 {
		want = []string{"ready", "error"}
	}
	expr := `new Promise(resolve => {
		const want = ` + string(mustJSON(want)) + `;
		const state = () => document.readyState === "complete" ? document.documentElement.dataset.state || "" : "";
		const check = () => { if (want.includes(state())) { resolve(state()); return true; } return false; };
		if (check()) return;
		const seen = new MutationObserver(check);
		seen.observe(document.documentElement, {attributes: true, attributeFilter: ["data-state"]});
		window.addEventListener("load", check);
		setTimeout(() => resolve(state()), 30000);
	})`
	deadline := time.After(35 * time.Second)
	var state string
	var err error
	for {
		if err = tb.eval(expr, &state); err == nil || !tb.b.awaitEvent(deadline) {
			break
		}
	}
	if err != nil || !slices.Contains(want, state) {
		// Only now: errors forgets what it returns, and a later check
		// of the page's errors must still see them.
		tb.b.t.Fatalf("the page did not reach %v (it is %q: %v):\n%s", want, state, err, tb.b.errors())
	}
	return state
}

// eval runs a JavaScript expression in the page and decodes its JSON value.
func (tb *tab) eval(expr string, out any) error {
	var res struct {
		Result struct {
			Value json.RawMessage `json:"value"`
		} `json:"result"`
		ExceptionDetails *struct {
			Text string `json:"text"`
		} `json:"exceptionDetails"`
	}
	err := tb.b.call(tb.session, "Runtime.evaluate", map[string]any{"expression": expr, "returnByValue": true, "awaitPromise": true}, &res)
	if err != nil {
		return err
	}
	if res.ExceptionDetails != nil {
		return errors.New(res.ExceptionDetails.Text)
	}
	if out == nil {
		return nil
	}
	return json.Unmarshal(res.Result.Value, out)
}

func (tb *tab) mustEval(expr string, out any) {
	tb.b.t.Helper()
	require.NoError(tb.b.t, tb.eval(expr, out), expr)
}

// screenshot captures the whole page, beyond the viewport, as PNG.
func (tb *tab) screenshot() []byte {
	tb.b.t.Helper()
	var metrics struct {
		CSSContentSize struct {
			Width  float64 `json:"width"`
			Height float64 `json:"height"`
		} `json:"cssContentSize"`
	}
	require.NoError(tb.b.t, tb.b.call(tb.session, "Page.getLayoutMetrics", nil, &metrics))
	var shot struct {
		Data string `json:"data"`
	}
	require.NoError(tb.b.t, tb.b.call(tb.session, "Page.captureScreenshot", map[string]any{
		"format": "png", "captureBeyondViewport": true,
		"clip": map[string]any{"x": 0, "y": 0, "width": metrics.CSSContentSize.Width, "height": metrics.CSSContentSize.Height, "scale": 1},
	}, &shot))
	png, err := base64.StdEncoding.DecodeString(shot.Data)
	require.NoError(tb.b.t, err)
	return png
}
