package scan

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/base64"
	"encoding/json"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kube-sunset/sunset/catalog"
)

// peakHeap runs f and returns the most heap it held above what was live
// before, sampled every millisecond.
func peakHeap(t *testing.T, f func()) uint64 {
	t.Helper()
	// What the heap holds includes garbage the collector has not reached
	// yet, up to GOGC percent of the live heap, and how much depends on
	// how busy the machine is; the bound is on what the scan holds, so
	// collect often while measuring, as GOMEMLIMIT makes the shipped pod
	// do near its limit.
	defer debug.SetGCPercent(debug.SetGCPercent(20))
	sample := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	read := func() uint64 { metrics.Read(sample); return sample[0].Value.Uint64() }
	runtime.GC()
	base := read()
	var peak atomic.Uint64
	stop, stopped := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(stopped)
		for {
			if h := read(); h > peak.Load() {
				peak.Store(h)
			}
			select {
			case <-stop:
				return
			case <-time.After(time.Millisecond):
			}
		}
	}()
	f()
	close(stop)
	<-stopped
	if h := read(); h > peak.Load() {
		peak.Store(h)
	}
	if peak.Load() < base {
		return 0
	}
	return peak.Load() - base
}

func testJudge(t *testing.T) Judge {
	t.Helper()
	cat, err := catalog.New(nil)
	require.NoError(t, err)
	return Judge{Catalog: cat, Target: catalog.MustParseRelease("1.37")}
}

// helmSecret is a release record as Helm's Secret driver writes it.
func helmSecret(t *testing.T, namespace, name string, release any) *corev1.Secret {
	t.Helper()
	var gz bytes.Buffer
	zw, err := gzip.NewWriterLevel(&gz, gzip.BestCompression)
	require.NoError(t, err)
	require.NoError(t, json.NewEncoder(zw).Encode(release))
	require.NoError(t, zw.Close())
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "sh.helm.release.v1." + name + ".v1", Namespace: namespace,
			Labels: map[string]string{"owner": "helm", "status": "deployed", "name": name, "version": "1"}},
		Data: map[string][]byte{"release": []byte(base64.StdEncoding.EncodeToString(gz.Bytes()))},
	}
}

// A Secret labelled as Helm's, holding a small gzip that inflates to 60
// MiB of manifest, was parsed into a whole YAML node tree on every server
// scan: about 2 GB of heap. It is reported too large, none of its
// findings count, and the heap stays bounded; a real release beside it is
// judged as ever.
func TestHelmReleaseBombIsTooLarge(t *testing.T) {
	removed := "---\n# Source: app/templates/cron.yaml\napiVersion: batch/v1beta1\nkind: CronJob\nmetadata: {name: first}\n"
	bomb := helmSecret(t, "evil", "bomb", map[string]string{
		"manifest": removed + "---\n# Source: app/templates/big.yaml\napiVersion: v1\nkind: ConfigMap\ndata:\n" + strings.Repeat("  a: b\n", 60<<20/7),
	})
	require.Less(t, len(bomb.Data["release"]), 1<<20, "the bomb fits in a Secret")
	good := helmSecret(t, "shop", "web", map[string]string{"manifest": removed})
	// Under the record's bound, one document of 24 MiB: refused before
	// it is parsed.
	half := helmSecret(t, "evil", "half", map[string]string{
		"manifest": removed + "---\n# Source: app/templates/big.yaml\napiVersion: v1\nkind: ConfigMap\ndata:\n" + strings.Repeat("  a: b\n", 24<<20/7),
	})
	var records []helmRecord
	for _, s := range []*corev1.Secret{bomb, good, half} {
		records = append(records, helmRecord{namespace: s.Namespace, name: s.Labels["name"], revision: 1, data: func() []byte { return s.Data["release"] }})
	}
	c, err := NewCluster((&apiserver{t: t, records: records}).config(), testJudge(t))
	require.NoError(t, err)

	var errs []string
	var findings []string
	peak := peakHeap(t, func() {
		res := c.helmReleases(context.Background())
		for _, e := range res.Errors {
			errs = append(errs, e.String())
		}
		for _, f := range res.Findings {
			findings = append(findings, f.Origin.Release+" "+f.Name)
		}
	})
	t.Logf("peak heap above the baseline: %d MiB", peak>>20)
	require.Equal(t, []string{
		"helm release evil/bomb: too large: the release record, decompressed, is larger than 32 MiB",
		"helm release evil/half: app/templates/big.yaml: too large: the YAML document at line 1 is larger than 3 MiB",
	}, errs)
	require.Equal(t, []string{"shop/web first"}, findings, "none of the bomb's findings count")
	require.Less(t, peak, uint64(256<<20), "peak heap %d MiB", peak>>20)
}

// A manifest file under the file bound but of one 50 MiB document is
// refused before it is parsed, rather than parsed into gigabytes.
func TestOversizedManifestDocumentIsRefused(t *testing.T) {
	dir := t.TempDir()
	big := filepath.Join(dir, "big.yaml")
	require.NoError(t, os.WriteFile(big, []byte("apiVersion: batch/v1beta1\nkind: CronJob\nmetadata: {name: big}\nspec:\n"+strings.Repeat("  a: b\n", 50<<20/7)), 0o644))
	over := filepath.Join(dir, "over.yaml")
	require.NoError(t, os.WriteFile(over, nil, 0o644))
	require.NoError(t, os.Truncate(over, MaxFileSize+1))

	var errs []string
	var removed int
	peak := peakHeap(t, func() {
		res := Files{Judge: testJudge(t)}.Scan(context.Background(), []string{dir})
		for _, e := range res.Errors {
			errs = append(errs, e.String())
		}
		removed = res.Removed()
	})
	t.Logf("peak heap above the baseline: %d MiB", peak>>20)
	require.Equal(t, []string{
		big + ": too large: the YAML document at line 1 is larger than 3 MiB",
		over + ": too large: the file is larger than 64 MiB",
	}, errs)
	require.Zero(t, removed)
	require.Less(t, peak, uint64(256<<20), "peak heap %d MiB", peak>>20)
}
