package api

import (
	"fmt"
	"testing"
	"time"

	"github.com/kube-sunset/sunset/countkey"
)

// benchKeys are a day of a busy API as ScanCounts hands them over: 1,000
// clients on 3 nodes in each of 24 hours, in key order, with the strings
// of equal values shared.
func benchKeys() ([]countkey.CountKey, []uint64) {
	var keys []countkey.CountKey
	var counts []uint64
	now := buildNow.Truncate(time.Hour)
	users := make([][2]string, 1000)
	for u := range users {
		users[u] = [2]string{fmt.Sprintf("system:serviceaccount:team-%03d:app-%03d", u%200, u), fmt.Sprintf("app-%03d/v1.4.2 (linux/amd64) kubernetes/0f3e2a1", u)}
	}
	verbs := []string{"get", "list", "watch"}
	for h := 23; h >= 0; h-- {
		for n := range 3 {
			node := fmt.Sprintf("master-%d", n)
			for u, id := range users {
				keys = append(keys, countkey.CountKey{Cluster: "default", API: "flowschemas.v1beta3.flowcontrol.apiserver.k8s.io",
					Cell: countkey.Cell{Hour: now.Add(-time.Duration(h) * time.Hour), Node: node, Username: id[0], UserAgent: id[1], Verb: verbs[u%3]}})
				counts = append(counts, uint64(1+20/(u+1)))
			}
		}
	}
	return keys, counts
}

// BenchmarkBuild measures building last24h from a day of counts already
// read, beside the floor of adding them up: what the builder costs above
// touching each count once.
func BenchmarkBuild(b *testing.B) {
	keys, counts := benchKeys()
	b.Run("sum", func(b *testing.B) {
		for b.Loop() {
			var total uint64
			for i := range keys {
				if keys[i].Hour.After(buildNow) {
					b.Fatal("future hour")
				}
				total += counts[i]
			}
			if total == 0 {
				b.Fatal("nothing counted")
			}
		}
	})
	for _, users := range []int{10, 100} {
		b.Run(fmt.Sprintf("users=%d", users), func(b *testing.B) {
			for b.Loop() {
				bl := newBuilder(buildNow, 0, notSystem)
				for i := range keys {
					if err := bl.add(keys[i], counts[i]); err != nil {
						b.Fatal(err)
					}
				}
				st := bl.status("", users)
				st.Workloads = bl.workloads(nil)
				if got := len(st.CurrentHour.ByNode[0].ByUser); got != users {
					b.Fatalf("%d users", got)
				}
			}
		})
	}
}
