package scan

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/base64"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
)

// gzipped is one gzip member of s. gzip readers (Helm's and the scan's)
// read concatenated members as one stream, so a record is made of a
// member of its own and a shared one, without compressing megabytes for
// each.
func gzipped(t *testing.T, s []byte) []byte {
	t.Helper()
	var b bytes.Buffer
	zw := gzip.NewWriter(&b)
	_, err := zw.Write(s)
	require.NoError(t, err)
	require.NoError(t, zw.Close())
	return b.Bytes()
}

// Anyone who may create Secrets in a namespace can label hundreds of them
// as deployed Helm releases, each as large as an object may be. The scan
// held every one's data before judging any: 300 of 1.4 MiB peaked at
// 1,525 MiB of heap, three times the scanner's 512 MiB limit. Listed without their data and
// read one at a time, they are all judged in a few MiB.
func TestManyLargeReleaseRecordsAreReadOneAtATime(t *testing.T) {
	releases := 300
	if raceEnabled {
		// The same path, in a time the race detector allows.
		releases = 30
	}
	blob := func() []byte {
		random := make([]byte, 1<<20+47<<10)
		_, _ = rand.NewChaCha8([32]byte{7}).Read(random)
		return gzipped(t, []byte(base64.StdEncoding.EncodeToString(random)))
	}()
	end := gzipped(t, []byte(`\n"}`))
	record := func(name string) []byte {
		head := gzipped(t, []byte(`{"manifest":"---\n# Source: app/templates/cron.yaml\napiVersion: batch/v1beta1\nkind: CronJob\nmetadata:\n  name: `+name+
			`\n---\n# Source: app/templates/blob.yaml\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: blob\ndata:\n  blob: `))
		return []byte(base64.StdEncoding.EncodeToString(slices.Concat(head, blob, end)))
	}
	require.Len(t, record("rel-000"), 1_468_756, "a record of about 1.4 MiB, under the 1.5 MiB an object may take")

	a := &apiserver{t: t}
	var want []string
	for i := range releases {
		name := fmt.Sprintf("rel-%03d", i)
		ns := fmt.Sprintf("team-%d", i%10)
		a.records = append(a.records, helmRecord{namespace: ns, name: name, revision: 1, data: func() []byte { return record(name) }})
		want = append(want, ns+"/"+name+" "+name+" "+"removed")
	}
	slices.Sort(want)
	c, err := NewCluster(a.config(), testJudge(t))
	require.NoError(t, err)

	var got, errs []string
	var scanned [2]int
	peak := peakHeap(t, func() {
		res, err := c.Scan(context.Background())
		require.NoError(t, err)
		for _, f := range res.Findings {
			got = append(got, f.Origin.Release+" "+f.Name+" "+f.Severity)
		}
		for _, e := range res.Errors {
			errs = append(errs, e.String())
		}
		for _, n := range res.NotScanned {
			errs = append(errs, n.Resource+" "+n.Reason)
		}
		scanned = [2]int{res.Scanned.HelmReleases, res.Scanned.Objects}
	})
	t.Logf("peak heap above the baseline: %d MiB", peak>>20)
	slices.Sort(got)
	require.Equal(t, want, got)
	require.Empty(t, errs)
	require.Equal(t, [2]int{releases, 2 * releases}, scanned)
	require.Equal(t, []string{"500"}, a.limits, "listed in pages of 500, metadata only")
	require.Equal(t, releases, a.dataServed, "each record's data read once")
	require.Equal(t, 1, a.mostData, "one record's data at a time")
	require.Less(t, peak, uint64(48<<20), "peak heap %d MiB", peak>>20)
}
