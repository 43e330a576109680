package test

import (
	"io"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// endpointSpan matches an HTTP path as pages cite it, perhaps after its
// method: `GET /metrics`, `/-/ready?verbose`.
var endpointSpan = regexp.MustCompile(`^(?:(GET|POST|PUT|DELETE) )?(/[^\s*]*)$`)

// notEndpoints are the first segments of paths the pages name that are
// files or other programs' names, not Sunset's HTTP paths. gate is served
// only with gate.enabled, over HTTPS: the gate's own tests reach it.
var notEndpoints = map[string]bool{"var": true, "etc": true, "usr": true, "proc": true, "tmp": true, "home": true,
	"aws": true, "subresource": true, "gate": true}

// placeholder matches a part of a path a page leaves to the reader:
// {name}, <node>, and an optional [/{release}].
var placeholder = regexp.MustCompile(`\{[^}]*\}|<[^>]*>`)

// Every HTTP path a page names is one `sunset serve` serves: a GET, POST
// or DELETE of it (the method the page gives, else GET) is answered by a
// route, not by the 404 of a path nothing serves. An object that does not
// exist is a 404 too, but a JSON Status from its route. Paths ending in /
// are folders of files (/assets/), which only their files answer.
func TestDocsNameEndpointsThatExist(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the binary")
	}
	p := startBinary(t, t.TempDir())
	type request struct{ method, path string }
	cited := map[request][]string{}
	for page, text := range docPages(t) {
		for _, m := range codeSpan.FindAllStringSubmatch(text, -1) {
			e := endpointSpan.FindStringSubmatch(m[1])
			if e == nil {
				continue
			}
			method, path := e[1], strings.TrimSuffix(e[2], "/...")
			first, _, _ := strings.Cut(strings.TrimPrefix(path, "/"), "/")
			if notEndpoints[first] || (strings.HasSuffix(path, "/") && path != "/") {
				continue
			}
			if method == "" {
				method = http.MethodGet
			}
			// An optional part, both with and without it.
			paths := []string{path}
			if before, optional, ok := strings.Cut(path, "["); ok {
				optional, after, _ := strings.Cut(optional, "]")
				paths = []string{before + after, before + optional + after}
			}
			for _, path := range paths {
				r := request{method, placeholder.ReplaceAllString(path, "x")}
				cited[r] = append(cited[r], page)
			}
		}
	}
	var missing []string
	for r, pages := range cited {
		req, err := http.NewRequest(r.method, p.url+r.path, nil)
		require.NoError(t, err)
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		body, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		resp.Body.Close()
		if resp.StatusCode == http.StatusNotFound && !strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") {
			slices.Sort(pages)
			missing = append(missing, r.method+" "+r.path+" ("+strings.Join(slices.Compact(pages), ", ")+"): "+strings.TrimSpace(string(body)))
		}
	}
	slices.Sort(missing)
	t.Logf("%d requests the pages name", len(cited))
	require.GreaterOrEqual(t, len(cited), 25, "requests checked")
	require.Empty(t, missing, "pages name paths sunset serve does not serve")
}
