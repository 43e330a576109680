package test

import (
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kube-sunset/sunset/config"
)

// docPages are the documents a user reads: the README, CONTRIBUTING.md,
// every page under docs/ and the benchmarks' README, by path from the
// repository's root.
func docPages(t *testing.T) map[string]string {
	t.Helper()
	pages := map[string]string{}
	read := func(path string) {
		raw, err := os.ReadFile(filepath.Join("..", path))
		require.NoError(t, err)
		pages[path] = string(raw)
	}
	for _, p := range []string{"README.md", "CONTRIBUTING.md", "benchmarks/README.md"} {
		read(p)
	}
	require.NoError(t, filepath.WalkDir("../docs", func(path string, e fs.DirEntry, err error) error {
		if err == nil && !e.IsDir() && strings.HasSuffix(path, ".md") {
			read(strings.TrimPrefix(path, "../"))
		}
		return err
	}))
	return pages
}

// fence matches a fenced block and its info string.
var fence = regexp.MustCompile("(?ms)^```([^\n]*)\n(.*?)^```")

// prose is a page without its fenced blocks.
func prose(page string) string { return fence.ReplaceAllString(page, "") }

var (
	mdLink  = regexp.MustCompile(`\]\(([^)\s]+)\)`)
	heading = regexp.MustCompile(`(?m)^#{1,6} (.+)$`)
)

// anchors are the fragments GitHub gives a page's headings.
func anchors(page string) map[string]bool {
	out := map[string]bool{}
	for _, m := range heading.FindAllStringSubmatch(prose(page), -1) {
		a := strings.ToLower(strings.TrimSpace(m[1]))
		a = regexp.MustCompile(`[^\p{L}\p{N}\- _]`).ReplaceAllString(a, "")
		out[strings.ReplaceAll(a, " ", "-")] = true
	}
	return out
}

// Every relative link of every page leads somewhere: a file or folder of
// the repository, and a heading of the page when it names one.
func TestDocsLinksResolve(t *testing.T) {
	pages := docPages(t)
	var broken []string
	checked := 0
	for path, page := range pages {
		for _, m := range mdLink.FindAllStringSubmatch(prose(page), -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			checked++
			file, frag, _ := strings.Cut(target, "#")
			dest := path
			if file != "" {
				dest = filepath.Clean(filepath.Join(filepath.Dir(path), file))
				if _, err := os.Stat(filepath.Join("..", dest)); err != nil {
					broken = append(broken, path+": "+target+" (no such file)")
					continue
				}
			}
			if frag == "" {
				continue
			}
			destPage, ok := pages[dest]
			if !ok {
				broken = append(broken, path+": "+target+" (a fragment of a page that is not documentation)")
				continue
			}
			if !anchors(destPage)[frag] {
				broken = append(broken, path+": "+target+" (no such heading)")
			}
		}
	}
	t.Logf("%d relative links checked", checked)
	require.Greater(t, checked, 60, "links checked")
	require.Empty(t, broken, "broken links")
}

var (
	// metricName matches a Sunset metric as pages cite it, perhaps with
	// labels or a histogram's suffix.
	metricName = regexp.MustCompile(`^(sunset_[a-z0-9_]+?)(?:_bucket|_sum|_count)?(?:\{.*\})?$`)
	alertName  = regexp.MustCompile(`^Sunset[A-Z][A-Za-z]+$`)
	envVar     = regexp.MustCompile(`^(SUNSET_[A-Z0-9_]+)(?:=.*)?$`)
	// configKey matches a nested config key as pages cite it, perhaps
	// with a value.
	configKey = regexp.MustCompile(`^((?:kafka|metrics|admission|ingest|catalog|clusters)\.[a-z<*][A-Za-z0-9.<>*-]*)(?:[:=].*)?$`)
)

// What the pages cite as code is what Sunset has: every metric is one the
// code declares, every alert is in the shipped rules, every config key
// and SUNSET_ variable is in the configuration reference (or, for the
// variables tests and benchmarks read, in the code).
func TestDocsCiteMetricsAlertsAndKeysThatExist(t *testing.T) {
	code := declaredNames(t, "..")
	rules, err := os.ReadFile("../deploy/prometheus/sunset-rules.yaml")
	require.NoError(t, err)
	keys, envs := map[string]bool{}, map[string]bool{}
	for _, k := range config.Keys() {
		keys[k.Name] = true
		envs[k.Env] = true
	}
	goSource := allGoSource(t)
	var unknown []string
	counts := map[string]int{}
	for path, page := range docPages(t) {
		for _, m := range codeSpan.FindAllStringSubmatch(page, -1) {
			span := m[1]
			switch {
			case metricName.MatchString(span):
				counts["metrics"]++
				name := metricName.FindStringSubmatch(span)[1]
				if !code.values[name] && !code.values[strings.TrimSuffix(name, "_total")] {
					unknown = append(unknown, path+": metric "+span)
				}
			case alertName.MatchString(span):
				counts["alerts"]++
				if !strings.Contains(string(rules), "alert: "+span+"\n") {
					unknown = append(unknown, path+": alert "+span)
				}
			case envVar.MatchString(span):
				counts["variables"]++
				name := envVar.FindStringSubmatch(span)[1]
				if !envs[name] && !strings.Contains(goSource, `"`+name+`"`) {
					unknown = append(unknown, path+": variable "+span)
				}
			case configKey.MatchString(span) && !strings.Contains(span, ".k8s.io"):
				counts["keys"]++
				if key := configKey.FindStringSubmatch(span)[1]; !citesKey(keys, key) {
					unknown = append(unknown, path+": key "+span)
				}
			}
		}
	}
	t.Logf("checked: %v", counts)
	require.Greater(t, counts["metrics"], 60, "metrics checked")
	require.Greater(t, counts["alerts"], 10, "alerts checked")
	require.Greater(t, counts["keys"], 40, "keys checked")
	require.Empty(t, unknown, "pages cite what Sunset does not have")
}

// allGoSource is every Go file of the module, tests included, for the
// variables that only tests and benchmarks read.
func allGoSource(t *testing.T) string {
	t.Helper()
	var b strings.Builder
	require.NoError(t, filepath.WalkDir("..", func(path string, e fs.DirEntry, err error) error {
		if err != nil || e.IsDir() || !strings.HasSuffix(path, ".go") {
			return err
		}
		raw, err := os.ReadFile(path)
		b.Write(raw)
		return err
	}))
	return b.String()
}

// citesKey reports whether key names a config key, or the key of a group
// of them (kafka.tls), or one with a map key filled in
// (clusters.prod.version).
func citesKey(keys map[string]bool, key string) bool {
	key = strings.TrimSuffix(strings.TrimSuffix(key, ".*"), ".")
	for k := range keys {
		if k == key || strings.HasPrefix(k, key+".") {
			return true
		}
		if pattern, ok := strings.CutPrefix(k, "clusters.<name>."); ok && strings.HasPrefix(key, "clusters.") &&
			strings.HasSuffix(key, "."+pattern) {
			return true
		}
	}
	return false
}

// sunsetLine matches a command line that runs Sunset, in a page's block.
var sunsetLine = regexp.MustCompile(`(?m)^\s*(?:\$ )?(?:\./)?(?:bin/)?sunset ((?:store |report |fix )?[a-z][a-z-]*)\b(.*)$`)

// Every flag a page passes to a sunset command, in a block or in a code
// span, is one that command has, as its --help lists them.
func TestDocsSunsetCommandsUseRealFlags(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the binary")
	}
	flagsOf := map[string]map[string]bool{}
	known := func(command string) map[string]bool {
		if f, ok := flagsOf[command]; ok {
			return f
		}
		out, err := exec.Command(sunsetBin, append(strings.Fields(command), "--help")...).CombinedOutput()
		require.NoError(t, err, "sunset %s --help: %s", command, out)
		f := map[string]bool{}
		for _, m := range regexp.MustCompile(`(?m)^\s+(?:-\w, )?--([a-z0-9-]+)`).FindAllStringSubmatch(string(out), -1) {
			f[m[1]] = true
		}
		flagsOf[command] = f
		return f
	}
	var unknown []string
	checked := 0
	for path, page := range docPages(t) {
		var commands []string
		for _, block := range fence.FindAllStringSubmatch(page, -1) {
			commands = append(commands, block[2])
		}
		for _, span := range codeSpan.FindAllStringSubmatch(prose(page), -1) {
			commands = append(commands, span[1])
		}
		for _, text := range commands {
			for _, m := range sunsetLine.FindAllStringSubmatch(text, -1) {
				command := m[1]
				if strings.HasPrefix(command, "report ") && command != "report webhooks" {
					command = "report" // report NAME
				}
				if strings.HasPrefix(command, "store ") && command != "store verify" {
					continue
				}
				flags := known(command)
				for _, f := range regexp.MustCompile(`(?:^|\s)--([a-z0-9-]+)`).FindAllStringSubmatch(m[2], -1) {
					checked++
					if !flags[f[1]] && f[1] != "help" {
						unknown = append(unknown, path+": sunset "+command+" --"+f[1])
					}
				}
			}
		}
	}
	t.Logf("%d flags checked in %d commands", checked, len(flagsOf))
	require.Greater(t, checked, 20, "flags checked")
	require.Empty(t, unknown, "pages pass flags Sunset does not have")
}

// otherProgramsFlags are flags the pages name that are not Sunset's:
// kube-apiserver's audit flags, and --namespace, which `kubectl sunset`
// takes from kubectl only to refuse it, saying why.
var otherProgramsFlags = regexp.MustCompile(`^(audit-[a-z-]+|namespace)$`)

// flagSpan matches a flag a page writes as code on its own: `--since`,
// `--exclude-system=false`.
var flagSpan = regexp.MustCompile(`^--([a-z0-9-]+)(?:[= ].*)?$`)

// Every flag a page names on its own, in its prose or tables, is a flag of
// some sunset command, as their --help list them, unless it is another
// program's.
func TestDocsNameFlagsThatExist(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the binary")
	}
	help := func(args ...string) string {
		out, err := exec.Command(sunsetBin, append(args, "--help")...).CombinedOutput()
		require.NoError(t, err, "sunset %s --help: %s", strings.Join(args, " "), out)
		return string(out)
	}
	commands := [][]string{{}, {"store", "verify"}, {"report", "webhooks"}, {"fix", "crd"}, {"fix", "releases"}}
	_, list, ok := strings.Cut(help(), "Available Commands:\n")
	require.True(t, ok, "sunset --help lists no commands")
	list, _, _ = strings.Cut(list, "\n\n")
	for _, line := range strings.Split(list, "\n") {
		if f := strings.Fields(line); len(f) > 0 && f[0] != "help" && f[0] != "completion" {
			commands = append(commands, []string{f[0]})
		}
	}
	require.GreaterOrEqual(t, len(commands), 10, "commands: %v", commands)
	flags := map[string]bool{}
	for _, c := range commands {
		for _, m := range regexp.MustCompile(`(?m)^\s+(?:-\w, )?--([a-z0-9-]+)`).FindAllStringSubmatch(help(c...), -1) {
			flags[m[1]] = true
		}
	}
	var unknown []string
	checked := 0
	for path, page := range docPages(t) {
		for _, m := range codeSpan.FindAllStringSubmatch(prose(page), -1) {
			f := flagSpan.FindStringSubmatch(m[1])
			if f == nil || otherProgramsFlags.MatchString(f[1]) {
				continue
			}
			checked++
			if !flags[f[1]] {
				unknown = append(unknown, path+": --"+f[1])
			}
		}
	}
	slices.Sort(unknown)
	t.Logf("%d flags named on their own, against %d flags of %d commands", checked, len(flags), len(commands))
	require.Greater(t, checked, 100, "flags checked")
	require.Empty(t, slices.Compact(unknown), "pages name flags no sunset command has")
}

// yamlBlock is a fenced YAML block, indented as a list item's may be.
var yamlBlock = regexp.MustCompile("(?ms)^( *)```yaml\n(.*?)^ *```")

// Every config a managed-cluster page shows loads as written: the keys
// exist, the values are valid, and credentials are nowhere in it.
func TestManagedClusterConfigsLoad(t *testing.T) {
	raw, err := os.ReadFile("../docs/inputs/managed.md")
	require.NoError(t, err)
	blocks := yamlBlock.FindAllStringSubmatch(string(raw), -1)
	require.Len(t, blocks, 3, "EKS, GKE and AKS")
	for _, b := range blocks {
		var body strings.Builder
		for _, line := range strings.SplitAfter(b[2], "\n") {
			body.WriteString(strings.TrimPrefix(line, b[1]))
		}
		path := filepath.Join(t.TempDir(), "sunset.yaml")
		require.NoError(t, os.WriteFile(path, []byte(body.String()), 0o600))
		_, err := config.Load(config.Flags(), path)
		require.NoError(t, err, body.String())
		require.NotContains(t, strings.ToLower(body.String()), "password:", "credentials stay out of the file")
	}
}

// inAnyPackage are paths the docs name within whichever package, not from
// the repository's root.
var inAnyPackage = map[string]bool{"testdata/fuzz/": true}

// builtPaths are the rooted folders .gitignore lists, such as
// test/e2e/.cache/: the build makes them, so a clean clone lacks them and
// the docs may name them all the same.
func builtPaths(t *testing.T) []string {
	raw, err := os.ReadFile("../.gitignore")
	require.NoError(t, err)
	var built []string
	for _, line := range strings.Split(string(raw), "\n") {
		if dir, ok := strings.CutPrefix(strings.TrimSpace(line), "/"); ok && strings.HasSuffix(dir, "/") {
			built = append(built, dir)
		}
	}
	return built
}

// Every code span of the pages that names a file or folder of the
// repository (it begins with one of the repository's top-level folders)
// names one that exists, so that a file moved or renamed is not left
// behind in the docs. Spans with wildcards, placeholders or more than a
// path (a colon, a space) are not paths, and folders the build makes are
// not checked.
func TestDocsNamePathsThatExist(t *testing.T) {
	entries, err := os.ReadDir("..")
	require.NoError(t, err)
	built := builtPaths(t)
	require.Contains(t, built, "test/e2e/.cache/", "the e2e peers' cache is built, not committed")
	tops := map[string]bool{}
	for _, e := range entries {
		if e.IsDir() && !strings.HasPrefix(e.Name(), ".") {
			tops[e.Name()] = true
		}
	}
	var missing []string
	checked := 0
	for page, text := range docPages(t) {
		for _, m := range codeSpan.FindAllStringSubmatch(prose(text), -1) {
			span, _, _ := strings.Cut(m[1], "#")
			if strings.ContainsAny(span, " *?{}<>$:=,…|") {
				continue
			}
			first, _, ok := strings.Cut(span, "/")
			if !ok || !tops[first] || inAnyPackage[span] {
				continue
			}
			if slices.ContainsFunc(built, func(dir string) bool { return strings.HasPrefix(span+"/", dir) }) {
				continue
			}
			checked++
			if _, err := os.Stat(filepath.Join("..", span)); err != nil {
				missing = append(missing, page+": "+m[1])
			}
		}
	}
	slices.Sort(missing)
	require.Empty(t, missing, "paths the docs name that do not exist")
	t.Logf("%d paths named in the docs exist", checked)
}
