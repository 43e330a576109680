package test

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// runnableMarker is the info string of a shell block a page offers to run
// as written, beside `make demo`: "```sh runnable".
const runnableMarker = "sh runnable"

// runnableBlock is a block a page marks runnable, and its commands.
type runnableBlock struct {
	page  string
	steps []quickStep
}

// runnableBlocks are the blocks of every page under docs/ marked
// runnable, in page order. (The README's quick start has a test of its
// own.)
func runnableBlocks(t *testing.T) []runnableBlock {
	t.Helper()
	var out []runnableBlock
	for path, page := range docPages(t) {
		if !strings.HasPrefix(path, "docs/") {
			continue
		}
		for _, m := range fence.FindAllStringSubmatch(page, -1) {
			if strings.TrimSpace(m[1]) == runnableMarker {
				out = append(out, runnableBlock{page: path, steps: parseSteps(t, m[2])})
			}
		}
	}
	slices.SortStableFunc(out, func(a, b runnableBlock) int { return strings.Compare(a.page, b.page) })
	return out
}

// The shell blocks a page marks "sh runnable" run as written, beside
// `make demo` (serving its captures on localhost:8080, as the README's
// quick start starts it), each block in a fresh directory that holds the
// checkout's files as its root does, with the sunset that make demo built
// on the PATH. Where a block shows a command's output as "# " lines right
// under it, the command prints exactly that (standard output and error
// together); where it shows none, the command prints nothing on standard
// output. So the Try-it blocks, the recipes and the scans of the pages
// stay what the program does.
func TestDocsRunnableBlocksRun(t *testing.T) {
	if testing.Short() {
		t.Skip("runs make demo")
	}
	requireDemoTools(t, "the pages' runnable blocks")
	if ownNetwork(t, "TestDocsRunnableBlocksRun") {
		return
	}
	blocks := runnableBlocks(t)
	pages, commands := map[string]bool{}, 0
	for _, b := range blocks {
		pages[b.page] = true
		commands += len(b.steps)
		require.NotEmpty(t, b.steps, "%s: a runnable block with no command", b.page)
	}
	t.Logf("%d commands in %d runnable blocks of %d pages", commands, len(blocks), len(pages))
	for _, page := range []string{"docs/cli.md", "docs/scanning.md", "docs/api.md", "docs/admission-webhooks.md", "docs/counting.md"} {
		require.True(t, pages[page], "%s has no block marked %q", page, runnableMarker)
	}
	require.GreaterOrEqual(t, commands, 12, "commands in runnable blocks")
	sameHour(t, "the pages' runnable blocks", func() []string { return runBlocks(t, blocks) })
}

// runBlocks runs make demo until the blocks have run, and returns how
// their output differs from the pages'.
func runBlocks(t *testing.T, blocks []runnableBlock) []string {
	t.Helper()
	root, err := filepath.Abs("..")
	require.NoError(t, err)
	_, stop := startDemo(t, "make demo", append(os.Environ(), "DEMO_DIR="+t.TempDir()))
	defer stop()
	env := append(os.Environ(), "PATH="+filepath.Join(root, "bin")+":"+os.Getenv("PATH"))
	var diffs []string
	for _, b := range blocks {
		dir := checkoutDir(t, root)
		for _, s := range b.steps {
			cmd := exec.Command("bash", "-c", s.command)
			cmd.Dir, cmd.Env = dir, env
			if s.want == nil {
				out, err := cmd.Output()
				var exit *exec.ExitError
				if errors.As(err, &exit) {
					out = append(out, exit.Stderr...)
				}
				require.NoError(t, err, "%s: $ %s\n%s", b.page, s.command, out)
				require.Empty(t, string(out), "%s: $ %s shows no output, but printed some", b.page, s.command)
				continue
			}
			out, err := cmd.CombinedOutput()
			require.NoError(t, err, "%s: $ %s\n%s", b.page, s.command, out)
			got := strings.Split(strings.TrimRight(string(out), "\n"), "\n")
			for i := range got {
				got[i] = strings.TrimRight(got[i], " \t")
			}
			if strings.Join(got, "\n") != strings.Join(s.want, "\n") {
				diffs = append(diffs, fmt.Sprintf("%s: $ %s\nthe page shows:\n%s\nit printed:\n%s\n", b.page, s.command, strings.Join(s.want, "\n"), strings.Join(got, "\n")))
			}
		}
	}
	return diffs
}

// copiedFolders are the checkout's folders that checkoutDir copies rather
// than links: a scan reads a kustomization through its real path, and
// through a symlinked folder its findings would name the kustomization
// without the resource file and line a checkout's scan names.
var copiedFolders = map[string]bool{"scan": true}

// checkoutDir is a fresh directory that holds the checkout's files, each
// top-level one a symlink (or a copy, copiedFolders), so that a block reads
// them as from the checkout's root while what it writes stays in the
// directory. What the checkout ignores at its root (bin, data directories)
// is left out.
func checkoutDir(t *testing.T, root string) string {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(root, ".gitignore"))
	require.NoError(t, err)
	ignored := map[string]bool{}
	for _, line := range strings.Split(string(raw), "\n") {
		if name, ok := strings.CutPrefix(strings.TrimSpace(line), "/"); ok && !strings.Contains(strings.TrimSuffix(name, "/"), "/") {
			ignored[strings.TrimSuffix(name, "/")] = true
		}
	}
	require.True(t, ignored["sunset-data"], "the checkout ignores ./sunset-data, which the pages' blocks write")
	entries, err := os.ReadDir(root)
	require.NoError(t, err)
	dir := t.TempDir()
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), ".") || ignored[e.Name()] {
			continue
		}
		if copiedFolders[e.Name()] {
			require.NoError(t, os.CopyFS(filepath.Join(dir, e.Name()), os.DirFS(filepath.Join(root, e.Name()))))
			continue
		}
		require.NoError(t, os.Symlink(filepath.Join(root, e.Name()), filepath.Join(dir, e.Name())))
	}
	return dir
}
