package web_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/emulation"
	cdplog "github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"
)

// commandTimeout bounds each step a test asks of Chromium, so that a hung
// browser fails the test rather than stalling it until go test's timeout.
const commandTimeout = time.Minute

// browser is headless Chromium driven by chromedp, over the DevTools
// protocol on --remote-debugging-pipe. It watches every tab it opened for
// what the page reports as going wrong.
type browser struct {
	t   *testing.T
	ctx context.Context
	mu  sync.Mutex
	// logs are the page's console errors, exceptions and error log
	// entries, as Chromium reports them.
	logs []string
	// events receives a token at each event Chromium sends a tab, without
	// waiting: a page's error, a new document, a load.
	events chan struct{}
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
	// The flags are spelled out rather than chromedp's defaults, which
	// change between its releases: the screenshots are taken with these.
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(),
		chromedp.ExecPath(path), chromedp.Headless, chromedp.NoSandbox, chromedp.Flag("disable-gpu", true),
		chromedp.Flag("disable-dev-shm-usage", true), chromedp.NoFirstRun, chromedp.NoDefaultBrowserCheck,
		chromedp.Flag("disable-extensions", true), chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-sync", true), chromedp.UserDataDir(t.TempDir()))
	// The cleanup ends ctx with chromedp.Cancel alone: after it, ctx's
	// cancel func waits forever (chromedp v0.23.0) if Chromium failed to
	// start.
	ctx, _ := chromedp.NewContext(allocCtx)
	b := &browser{t: t, ctx: ctx, events: make(chan struct{}, 1)}
	t.Cleanup(func() {
		// Browser.close ends Chromium and its helper processes cleanly;
		// the allocator kills what is left after half a minute.
		closing, done := context.WithTimeout(ctx, 30*time.Second)
		defer done()
		_ = chromedp.Cancel(closing)
		cancelAlloc()
	})
	// The first run starts Chromium and binds it to ctx, which has no
	// deadline: each later step has its own.
	require.NoError(t, chromedp.Do(ctx), "starting %s", path)
	return b
}

// event records what the page reports as going wrong, and wakes
// awaitEvent. chromedp calls it from a tab's loop, in the order Chromium
// sent the events, before it hands over the answer to a later command.
func (b *browser) event(ev any) {
	b.mu.Lock()
	switch ev := ev.(type) {
	case *runtime.EventConsoleAPICalled:
		if ev.Type == runtime.ConsoleAPICalledTypeError || ev.Type == runtime.ConsoleAPICalledTypeAssert {
			var parts []string
			for _, a := range ev.Args {
				parts = append(parts, fmt.Sprint(remoteValue(a))+a.Description)
			}
			b.logs = append(b.logs, "console."+string(ev.Type)+": "+strings.Join(parts, " "))
		}
	case *runtime.EventExceptionThrown:
		var text, description string
		if d := ev.ExceptionDetails; d != nil {
			text = d.Text
			if d.Exception != nil {
				description = d.Exception.Description
			}
		}
		b.logs = append(b.logs, "exception: "+text+" "+description)
	case *cdplog.EventEntryAdded:
		if e := ev.Entry; e != nil && e.Level == cdplog.EntryLevelError {
			b.logs = append(b.logs, fmt.Sprintf("log %s: %s %s", e.Source, e.Text, e.URL))
		}
	}
	b.mu.Unlock()
	select {
	case b.events <- struct{}{}:
	default:
	}
}

// remoteValue is a console argument's primitive value, nil for an object.
func remoteValue(o *runtime.RemoteObject) any {
	var v any
	if len(o.Value) > 0 {
		_ = json.Unmarshal(o.Value, &v)
	}
	return v
}

// errors returns and forgets what the page reported so far.
func (b *browser) errors() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := b.logs
	b.logs = nil
	return out
}

// awaitEvent returns once Chromium sends an event or the deadline passes,
// reporting which.
func (b *browser) awaitEvent(deadline <-chan time.Time) bool {
	select {
	case <-b.events:
		return true
	case <-b.ctx.Done():
		return false
	case <-deadline:
		return false
	}
}

// tab is one page, its own chromedp context.
type tab struct {
	b   *browser
	ctx context.Context
}

// newTab opens a page of the given size and colour scheme.
func (b *browser) newTab(width, height int, scheme string, mobile bool) *tab {
	b.t.Helper()
	// The tab ends with the browser, as the browser's context ends. As
	// the browser's, its life is bound to the context of its first run,
	// which therefore has no deadline.
	ctx, _ := chromedp.NewContext(b.ctx, chromedp.WithListener(b.event))
	require.NoError(b.t, chromedp.Do(ctx), "opening a tab")
	tb := &tab{b: b, ctx: ctx}
	tb.run(func(ctx context.Context) error {
		if _, err := chromedp.Call(ctx, emulation.SetDeviceMetricsOverride, emulation.SetDeviceMetricsOverrideParams{
			Width: int64(width), Height: int64(height), DeviceScaleFactor: 1, Mobile: mobile,
		}); err != nil {
			return err
		}
		_, err := chromedp.Call(ctx, emulation.SetEmulatedMedia, emulation.SetEmulatedMediaParams{
			Features: []*emulation.MediaFeature{{Name: "prefers-color-scheme", Value: scheme}},
		})
		return err
	})
	return tb
}

// run does one step in the tab, within commandTimeout, and fails the test
// if it fails.
func (tb *tab) run(step func(ctx context.Context) error) {
	tb.b.t.Helper()
	require.NoError(tb.b.t, tb.try(step))
}

// try does one step in the tab, within commandTimeout.
func (tb *tab) try(step func(ctx context.Context) error) error {
	ctx, cancel := context.WithTimeout(tb.ctx, commandTimeout)
	defer cancel()
	return step(ctx)
}

// open navigates and waits until the page says it has drawn what the API
// answered (html[data-state]), and returns that state.
func (tb *tab) open(url string, until ...string) string {
	tb.b.t.Helper()
	tb.run(func(ctx context.Context) error { return chromedp.Do(ctx, chromedp.Navigate(url)) })
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
	wanted, err := json.Marshal(want)
	require.NoError(tb.b.t, err)
	expr := `new Promise(resolve => {
		const want = ` + string(wanted) + `;
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

// eval runs a JavaScript expression in the page, awaiting a promise it
// returns, and decodes its JSON value into out (if not nil).
func (tb *tab) eval(expr string, out any) error {
	return tb.try(func(ctx context.Context) error {
		if out == nil {
			return chromedp.Do(ctx, chromedp.Evaluate[chromedp.Void](expr, chromedp.EvalAwaitPromise))
		}
		raw, err := chromedp.Run(ctx, chromedp.Evaluate[[]byte](expr, chromedp.EvalAwaitPromise))
		if err != nil {
			return err
		}
		return json.Unmarshal(raw, out)
	})
}

func (tb *tab) mustEval(expr string, out any) {
	tb.b.t.Helper()
	require.NoError(tb.b.t, tb.eval(expr, out), expr)
}

// press types keys (chromedp/kb's names for the special ones) into the
// page, as a keyboard would.
func (tb *tab) press(keys string) {
	tb.b.t.Helper()
	tb.run(func(ctx context.Context) error { return chromedp.Do(ctx, chromedp.KeyEvent(keys)) })
}

// screenshot captures the whole page, beyond the viewport, as PNG.
func (tb *tab) screenshot() []byte {
	tb.b.t.Helper()
	var png []byte
	tb.run(func(ctx context.Context) error {
		metrics, err := chromedp.Call(ctx, page.GetLayoutMetrics, cdp.Empty{})
		if err != nil {
			return err
		}
		size := metrics.CSSContentSize
		beyond := true
		shot, err := chromedp.Call(ctx, page.CaptureScreenshot, page.CaptureScreenshotParams{
			Format: page.CaptureScreenshotFormatPng, CaptureBeyondViewport: &beyond,
			Clip: &page.Viewport{X: 0, Y: 0, Width: size.Width, Height: size.Height, Scale: 1},
		})
		png = shot.Data
		return err
	})
	return png
}
