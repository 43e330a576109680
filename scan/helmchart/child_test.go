package helmchart

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"runtime/metrics"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kube-sunset/sunset/catalog"
	"github.com/kube-sunset/sunset/fieldrule"
	"github.com/kube-sunset/sunset/scan"
	"github.com/kube-sunset/sunset/scan/report"
)

func judge(t *testing.T) scan.Judge {
	t.Helper()
	cat, err := catalog.New(nil)
	require.NoError(t, err)
	rules, err := fieldrule.New(nil)
	require.NoError(t, err)
	return scan.Judge{Catalog: cat, Fields: rules, Target: catalog.MustParseRelease("1.37")}
}

// peakHeap samples this process's heap every millisecond until stop is
// closed, then sends the largest it saw.
func peakHeap(stop <-chan struct{}) <-chan uint64 {
	peak := make(chan uint64, 1)
	go func() {
		s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
		var most uint64
		t := time.NewTicker(time.Millisecond)
		defer t.Stop()
		for {
			metrics.Read(s)
			most = max(most, s[0].Value.Uint64())
			select {
			case <-stop:
				peak <- most
				return
			case <-t.C:
			}
		}
	}()
	return peak
}

// Each of the bombs (a gigabyte in one call of repeat, a string doubled
// 40 times, until building a slice of 100 million, nested ranges of a
// million each) is its own chart's error, the scan goes on, neither this
// process nor a child holds much more than the child's bound, and the
// chart beside them gives its findings. Rendered unbounded, the first
// three take 1 GiB, 2.7 GiB and all there is; the last runs for hours.
func TestBombsAreRenderedWithinTheChildsBounds(t *testing.T) {
	const memory = 256 << 20
	// The race detector slows the templates down tenfold: the bombs then
	// take longer to reach their bound.
	timeout := 3 * time.Second
	if raceDetector {
		timeout = 20 * time.Second
	}
	maxRSS := map[string]int64{}
	var current string
	child := &Child{Memory: memory, Timeout: timeout, exited: func(ps *os.ProcessState) {
		maxRSS[current] = ps.SysUsage().(*syscall.Rusage).Maxrss << 10
	}}
	stop := make(chan struct{})
	peak := peakHeap(stop)
	bombs := []string{"testdata/bombs/repeat", "testdata/bombs/doubling", "testdata/bombs/until", "testdata/bombs/loop"}
	files := scan.Files{Judge: judge(t), Charts: Renderer{Child: child}, Progress: func(_, p string) { current = p }}
	res := files.Scan(context.Background(), append(bombs, "testdata/bombs/normal"))
	close(stop)

	tooLarge := "rendering: too large: the memory its templates take is larger than 256 MiB"
	require.Equal(t, []report.InputError{
		{Path: "testdata/bombs/repeat", Err: tooLarge},
		{Path: "testdata/bombs/doubling", Err: tooLarge},
		{Path: "testdata/bombs/until", Err: tooLarge},
		{Path: "testdata/bombs/loop", Err: "rendering: timed out: its templates ran for more than " + seconds(timeout)},
	}, res.Errors)
	require.Equal(t, report.Scanned{Charts: 1, Objects: 2}, res.Scanned)
	require.Equal(t, []report.Finding{{
		Severity: "removed", Rule: "removed-api", APIVersion: "batch/v1beta1", Kind: "CronJob", Name: "release-name-nightly",
		DeprecatedIn: "1.21", RemovedIn: "1.25", Replacement: "batch/v1 CronJob",
		Message: "batch/v1beta1 CronJob is deprecated in v1.21+, unavailable in v1.25+; use batch/v1 CronJob", Source: report.SourceCatalog,
		Origin: report.Origin{Path: "testdata/bombs/normal", Template: "normal/templates/cron.yaml"},
	}}, res.Findings)

	heap := <-peak
	t.Logf("this process's heap: at most %d MiB", heap>>20)
	require.Less(t, heap, uint64(32<<20))
	for _, p := range append(bombs, "testdata/bombs/normal") {
		t.Logf("%s: the child's peak resident memory %d MiB", p, maxRSS[p]>>20)
		require.Positive(t, maxRSS[p], p)
		if !raceDetector {
			require.Less(t, maxRSS[p], int64(memory+addressSlack), p)
		}
	}
}

// A chart rendered in a child renders as it does in this process, and
// fails with the same message.
func TestChildRendersAsThisProcess(t *testing.T) {
	child := &Child{}
	for _, r := range []Renderer{{}, {Set: []string{"x=1"}, ReleaseName: "shop", Namespace: "prod", KubeVersion: "1.33"}} {
		want, err := r.Render("testdata/bombs/normal", scan.Capabilities{KubeVersion: "1.37"})
		require.NoError(t, err)
		r.Child = child
		got, err := r.Render("testdata/bombs/normal", scan.Capabilities{KubeVersion: "1.37"})
		require.NoError(t, err)
		require.Equal(t, want, got)
		require.Len(t, got.Manifests, 2)
	}

	dir := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "templates"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "Chart.yaml"), []byte("apiVersion: v2\nname: bad\nversion: 1.0.0\n"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "templates", "x.yaml"), []byte("{{ .Values.a.b.c }}\n"), 0o644))
	_, want := Renderer{}.Render(dir, scan.Capabilities{KubeVersion: "1.37"})
	require.Error(t, want)
	_, got := Renderer{Child: child}.Render(dir, scan.Capabilities{KubeVersion: "1.37"})
	require.EqualError(t, got, want.Error())
}

// A child's error over one of the scan's bounds is still a
// scan.TooLargeError here: a chart whose files are over MaxChartSize.
func TestChildKeepsTooLarge(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "files"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "Chart.yaml"), []byte("apiVersion: v2\nname: big\nversion: 1.0.0\n"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "files", "big"), make([]byte, scan.MaxChartSize), 0o644))
	_, err := Renderer{Child: &Child{}}.Render(dir, scan.Capabilities{KubeVersion: "1.37"})
	require.EqualError(t, err, "loading the chart: too large: the chart is larger than 64 MiB")
	var tooLarge *scan.TooLargeError
	require.ErrorAs(t, err, &tooLarge)
	require.Equal(t, &scan.TooLargeError{What: "the chart", Limit: scan.MaxChartSize}, tooLarge)
}

// How a child that gave no answer is reported, from its exit and the
// start of its standard error.
func TestChildFailures(t *testing.T) {
	for _, tc := range []struct {
		name, script, want string
	}{
		{"over memory", "exit 86", "rendering: too large: the memory its templates take is larger than 512 MiB"},
		{"out of address space", "echo 'runtime: out of memory: cannot allocate 1073741824-byte block (8126464 in use)' >&2; echo 'fatal error: out of memory' >&2; exit 2",
			"rendering: too large: the memory its templates take is larger than 512 MiB"},
		{"stack overflow", "echo 'runtime: goroutine stack exceeds 134217728-byte limit' >&2; echo 'fatal error: stack overflow' >&2; exit 2",
			"rendering: too large: the memory its templates take is larger than 512 MiB"},
		{"its own timer", "exit 87", "rendering: timed out: its templates ran for more than 60 s"},
		{"a panic", "echo 'panic: boom' >&2; echo more >&2; exit 2", "rendering: the renderer ended with exit status 2: panic: boom"},
		{"killed", "kill -9 $$", "rendering: the renderer ended with signal: killed"},
		{"no renderer", "echo hello", "rendering: sh answered with something else than a chart: does its main serve __render-chart?"},
		{"a long line", "printf '%0300d' 0 >&2; exit 3", "rendering: the renderer ended with exit status 3: " + strings.Repeat("0", 200) + "…"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Renderer{Child: &Child{Command: []string{"sh", "-c", tc.script}}}.Render("testdata/bombs/normal", scan.Capabilities{KubeVersion: "1.37"})
			require.EqualError(t, err, tc.want)
		})
	}
}

// The wall-clock bound kills a child that does not end, whatever it does.
func TestChildIsKilledAtItsTimeout(t *testing.T) {
	var state *os.ProcessState
	child := &Child{Command: []string{"sh", "-c", "exec sleep 600"}, Timeout: 100 * time.Millisecond,
		exited: func(ps *os.ProcessState) { state = ps }}
	_, err := Renderer{Child: child}.Render("testdata/bombs/normal", scan.Capabilities{KubeVersion: "1.37"})
	require.EqualError(t, err, "rendering: timed out: its templates ran for more than 100ms")
	require.ErrorIs(t, err, ErrTimedOut)
	require.Equal(t, syscall.SIGKILL, state.Sys().(syscall.WaitStatus).Signal())
}

// A renderer does not start another: a program that does not serve
// ChildArg, run again, would otherwise run again and again.
func TestChildStartsNoChildFromAChild(t *testing.T) {
	t.Setenv(childEnv, "1")
	_, err := Renderer{Child: &Child{}}.Render("testdata/bombs/normal", scan.Capabilities{KubeVersion: "1.37"})
	require.EqualError(t, err, "rendering: a chart's renderer may not start another")
}

// ServeChild refuses what is not a Child's request.
func TestServeChildRefusesOtherInput(t *testing.T) {
	var stdout, stderr bytes.Buffer
	require.Equal(t, 1, ServeChild(strings.NewReader("hello\n"), &stdout, &stderr))
	require.Empty(t, stdout.String())
	require.Equal(t, "reading the request: not a chart to render: __render-chart is for sunset itself\n", stderr.String())
}

// The watchdog calls over once the runtime holds more than its limit.
func TestWatchMemory(t *testing.T) {
	over := make(chan struct{})
	done := make(chan struct{})
	go func() { watchMemory(1, time.Millisecond, func() { close(over) }); close(done) }()
	<-over
	<-done
}
