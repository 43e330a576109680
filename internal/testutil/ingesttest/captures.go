package ingesttest

import (
	"bufio"
	"bytes"
	"os"
	"path/filepath"
	"sort"
	"testing"
	"time"
)

// Captured bodies and audit log lines in the repository's testdata
// (testdata/README.md says where each came from), as fuzzing seeds.

// CapturedNow is the clock of tests that read the captured traffic: 23
// minutes after its last event (2026-11-21 19:20:50 UTC), so every event
// falls in the last 24 hours and the current hour is 19:00.
var CapturedNow = time.Date(2026, 11, 21, 19, 50, 0, 0, time.UTC)

// CapturedBodies returns every webhook body kube-apiserver v1.36.3 sent in
// testdata/apiserver-v1.36/webhook-metadata-batch; root is the path of the
// repository's testdata directory.
func CapturedBodies(tb testing.TB, root string) [][]byte {
	tb.Helper()
	names, err := filepath.Glob(filepath.Join(root, "apiserver-v1.36/webhook-metadata-batch/*.body"))
	if err != nil || len(names) == 0 {
		tb.Fatalf("no captured bodies under %s: %v", root, err)
	}
	sort.Strings(names)
	var out [][]byte
	for _, n := range names {
		b, err := os.ReadFile(n)
		if err != nil {
			tb.Fatal(err)
		}
		out = append(out, b)
	}
	return out
}

// CapturedLines returns a sample of the captured audit log lines: every
// line that carries a deprecation annotation and every 25th other line, of
// kube-apiserver's own logs (Metadata and Request level) and of the public
// samples (AKS, Falco, audit2rbac).
func CapturedLines(tb testing.TB, root string) [][]byte {
	tb.Helper()
	var out [][]byte
	for _, name := range []string{
		"apiserver-v1.36/webhook-metadata-batch/audit-log-file.jsonl",
		"apiserver-v1.36/request-level-blocking/audit-log-file.jsonl",
		"public/aks-kube-audit-event-deprecated-sar-v1beta1.jsonl",
		"public/falco-k8s_audit-trace_files.jsonl",
		"public/audit2rbac-demo.log",
	} {
		f, err := os.Open(filepath.Join(root, name))
		if err != nil {
			tb.Fatal(err)
		}
		sc := bufio.NewScanner(f)
		sc.Buffer(nil, 16<<20)
		for i := 0; sc.Scan(); i++ {
			if i%25 == 0 || bytes.Contains(sc.Bytes(), []byte(`"k8s.io/deprecated"`)) {
				out = append(out, bytes.Clone(sc.Bytes()))
			}
		}
		_ = f.Close()
		if err := sc.Err(); err != nil {
			tb.Fatalf("%s: %v", name, err)
		}
	}
	return out
}
