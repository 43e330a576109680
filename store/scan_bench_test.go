package store

import (
	"fmt"
	"strconv"
	"testing"
	"time"

	badger "github.com/dgraph-io/badger/v4"
	"github.com/rs/zerolog"

	"github.com/kube-sunset/sunset/countkey"
)

// scanBenchStore holds one day of a busy API: 1,000 clients on 3 nodes
// in each of 24 hours, 72,000 counts, as a query of last24h reads them.
func scanBenchStore(b *testing.B) (*Store, time.Time, time.Time) {
	b.Helper()
	dir := b.TempDir()
	s, err := Open(Options{Dir: dir, NoSync: true, Logger: zerolog.Nop(), MaxClients: 2000})
	if err != nil {
		b.Fatal(err)
	}
	to := time.Now().UTC().Truncate(time.Hour)
	from := to.Add(-23 * time.Hour)
	var reqs []Request
	for h := from; !h.After(to); h = h.Add(time.Hour) {
		for n := range 3 {
			for u := range 1000 {
				reqs = append(reqs, Request{ID: strconv.Itoa(len(reqs)), Key: countkey.CountKey{Cluster: "default",
					API: "flowschemas.v1beta3.flowcontrol.apiserver.k8s.io",
					Cell: countkey.Cell{Hour: h, Node: fmt.Sprintf("master-%d", n),
						Username:  fmt.Sprintf("system:serviceaccount:team-%03d:app-%03d", u%200, u),
						UserAgent: fmt.Sprintf("app-%03d/v1.4.2 (linux/amd64) kubernetes/0f3e2a1", u), Verb: "list"}}})
			}
		}
	}
	if _, err := s.Apply(reqs); err != nil {
		b.Fatal(err)
	}
	// Reopened, the counts are in tables, as all but the newest are in a
	// store that has run for a while.
	if err := s.Close(); err != nil {
		b.Fatal(err)
	}
	if s, err = Open(Options{Dir: dir, NoSync: true, Logger: zerolog.Nop(), MaxClients: 2000}); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = s.Close() })
	return s, from, to
}

// BenchmarkScanCounts reads the 72,000 counts of a day of one API:
// through ScanCounts (keys decoded, values read), beside the floor of a
// bare badger iteration over the same keys without decoding them, and the
// iteration with value prefetch that ScanCounts used before.
func BenchmarkScanCounts(b *testing.B) {
	s, from, to := scanBenchStore(b)
	prefix := apiPrefix("default", "flowschemas.v1beta3.flowcontrol.apiserver.k8s.io")
	iterate := func(opts badger.IteratorOptions) int {
		n := 0
		_ = s.db.View(func(txn *badger.Txn) error {
			it := txn.NewIterator(opts)
			defer it.Close()
			for it.Rewind(); it.Valid(); it.Next() {
				n++
			}
			return nil
		})
		return n
	}
	b.Run("badger-keys", func(b *testing.B) {
		for b.Loop() {
			if n := iterate(badger.IteratorOptions{Prefix: prefix}); n != 72000 {
				b.Fatalf("%d keys", n)
			}
		}
	})
	b.Run("badger-prefetch", func(b *testing.B) {
		for b.Loop() {
			if n := iterate(badger.IteratorOptions{Prefix: prefix, PrefetchValues: true, PrefetchSize: 256}); n != 72000 {
				b.Fatalf("%d keys", n)
			}
		}
	})
	b.Run("ScanCounts", func(b *testing.B) {
		for b.Loop() {
			var total uint64
			if err := s.ScanCounts("default", "flowschemas.v1beta3.flowcontrol.apiserver.k8s.io", from, to, func(_ countkey.CountKey, n uint64) error {
				total += n
				return nil
			}); err != nil {
				b.Fatal(err)
			}
			if total != 72000 {
				b.Fatalf("%d requests", total)
			}
		}
	})
}
