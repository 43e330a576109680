package golden

import (
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// failures is a testing.TB that records failures instead of failing.
type failures struct {
	testing.TB
	failed []string
}

func (f *failures) Helper()                           {}
func (f *failures) Errorf(format string, args ...any) { f.failed = append(f.failed, format) }
func (f *failures) FailNow()                          {}

func withUpdate(t *testing.T, on bool) {
	old := *update
	*update = on
	t.Cleanup(func() { *update = old })
}

func TestAssertComparesBytes(t *testing.T) {
	withUpdate(t, false)
	path := filepath.Join(t.TempDir(), "out.golden")
	require.NoError(t, os.WriteFile(path, []byte("a\tb\n"), 0o644))

	f := &failures{TB: t}
	Assert(f, path, []byte("a\tb\n"))
	require.Empty(t, f.failed)
	Assert(f, path, []byte("a  b\n"))
	require.Len(t, f.failed, 1, "whitespace counts")

	f = &failures{TB: t}
	Assert(f, filepath.Join(t.TempDir(), "missing.golden"), []byte("x"))
	require.NotEmpty(t, f.failed, "a missing file fails")
}

func TestAssertJSONComparesValues(t *testing.T) {
	withUpdate(t, false)
	path := filepath.Join(t.TempDir(), "out.golden.json")
	require.NoError(t, os.WriteFile(path, []byte("{\n  \"a\": 1,\n  \"b\": [true]\n}\n"), 0o644))

	f := &failures{TB: t}
	AssertJSON(f, path, []byte(`{"b":[true],"a":1}`))
	require.Empty(t, f.failed)
	AssertJSON(f, path, []byte(`{"b":[true],"a":2}`))
	require.Len(t, f.failed, 1)
}

func TestUpdateWritesWhatTheTestGot(t *testing.T) {
	withUpdate(t, true)
	require.True(t, Update())
	dir := t.TempDir()
	text := filepath.Join(dir, "new", "out.golden")
	Assert(t, text, []byte("exact  bytes"))
	b, err := os.ReadFile(text)
	require.NoError(t, err)
	require.Equal(t, "exact  bytes", string(b))

	js := filepath.Join(dir, "out.golden.json")
	AssertJSON(t, js, []byte(`{"b":[1,2],"a":{}}`))
	b, err = os.ReadFile(js)
	require.NoError(t, err)
	require.Equal(t, []string{`{`, `  "b": [`, `    1,`, `    2`, `  ],`, `  "a": {}`, `}`, ``}, strings.Split(string(b), "\n"),
		"indented, in the order given, one final newline")
}

// goFiles lists the module's Go files, relative to its root, without the
// end-to-end test's own module and caches.
func goFiles(t *testing.T) []string {
	t.Helper()
	root := filepath.Join("..", "..", "..")
	var out []string
	require.NoError(t, filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		if d.IsDir() {
			if strings.HasPrefix(d.Name(), ".") && rel != "." || rel == filepath.Join("test", "e2e", "tools") {
				return filepath.SkipDir
			}
			return nil
		}
		if strings.HasSuffix(path, ".go") {
			out = append(out, rel)
		}
		return nil
	}))
	require.NotEmpty(t, out)
	return out
}

// The repository defines -update once, here: a test binary that imported
// this package and defined another would panic at start.
func TestOneUpdateFlag(t *testing.T) {
	def := regexp.MustCompile(`flag\.[A-Za-z]+(Var)?\([^)]*"update"`)
	var found []string
	for _, rel := range goFiles(t) {
		b, err := os.ReadFile(filepath.Join("..", "..", "..", rel))
		require.NoError(t, err)
		if def.Match(b) {
			found = append(found, filepath.ToSlash(rel))
		}
	}
	require.Equal(t, []string{"internal/testutil/golden/golden.go"}, found)
}

// Only tests import the test helpers: production code never carries a
// test flag, a server harness or the independent count.
func TestOnlyTestsImportTheHelpers(t *testing.T) {
	const helpers = "github.com/kube-sunset/sunset/internal/testutil/"
	fset := token.NewFileSet()
	for _, rel := range goFiles(t) {
		dir := filepath.ToSlash(filepath.Dir(rel))
		if strings.HasSuffix(rel, "_test.go") || strings.HasPrefix(dir, "internal/testutil/") {
			continue
		}
		f, err := parser.ParseFile(fset, filepath.Join("..", "..", "..", rel), nil, parser.ImportsOnly)
		require.NoError(t, err)
		for _, imp := range f.Imports {
			path, _ := strconv.Unquote(imp.Path.Value)
			require.False(t, strings.HasPrefix(path, helpers), "%s is not a test file, and imports %s", rel, path)
		}
	}
}

// make update-golden runs every package whose tests use this package:
// go test fails in a package that does not define -update, so the
// Makefile names them rather than ./....
func TestMakefileUpdatesEveryPackageThatUsesIt(t *testing.T) {
	mk, err := os.ReadFile(filepath.Join("..", "..", "..", "Makefile"))
	require.NoError(t, err)
	recipe := regexp.MustCompile(`(?m)^update-golden:.*\n((?:\t.*\n)+)`).FindSubmatch(mk)
	require.NotNil(t, recipe, "no update-golden target")
	var listed []string
	for _, f := range strings.Fields(string(recipe[1])) {
		if strings.HasPrefix(f, "./") {
			listed = append(listed, strings.TrimSuffix(strings.TrimPrefix(f, "./"), "/"))
		}
	}
	require.Contains(t, string(recipe[1]), " -update")

	var users []string
	for _, rel := range goFiles(t) {
		if !strings.HasSuffix(rel, "_test.go") {
			continue
		}
		b, err := os.ReadFile(filepath.Join("..", "..", "..", rel))
		require.NoError(t, err)
		dir := filepath.ToSlash(filepath.Dir(rel))
		if strings.Contains(string(b), `"github.com/kube-sunset/sunset/internal/testutil/golden"`) && dir != "internal/testutil/golden" && !slices.Contains(users, dir) {
			users = append(users, dir)
		}
	}
	slices.Sort(users)
	slices.Sort(listed)
	require.Equal(t, users, listed)

	// Every test the recipe names exists in one of them.
	run := regexp.MustCompile(`-run \\\s*'\^\(([A-Za-z0-9_|]+)\)\$\$'`).FindSubmatch(recipe[1])
	require.NotNil(t, run, "the recipe's -run pattern")
	var sources strings.Builder
	for _, rel := range goFiles(t) {
		if strings.HasSuffix(rel, "_test.go") && slices.Contains(listed, filepath.ToSlash(filepath.Dir(rel))) {
			b, err := os.ReadFile(filepath.Join("..", "..", "..", rel))
			require.NoError(t, err)
			sources.Write(b)
		}
	}
	for _, name := range strings.Split(string(run[1]), "|") {
		require.Contains(t, sources.String(), "\nfunc "+name+"(t *testing.T) {", "the Makefile names %s", name)
	}
}
