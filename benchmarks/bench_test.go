// Package benchmarks measures Sunset's ingest path against baselines run
// side by side. See README.md.
package benchmarks

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/dgraph-io/badger/v4"
	"github.com/rs/zerolog"
	auditv1 "k8s.io/apiserver/pkg/apis/audit/v1"

	"github.com/kube-sunset/sunset/app"
	"github.com/kube-sunset/sunset/config"
	"github.com/kube-sunset/sunset/countkey"
	"github.com/kube-sunset/sunset/ingest/auditjson"
	"github.com/kube-sunset/sunset/internal/testutil/storetest"
	"github.com/kube-sunset/sunset/internal/testutil/testserver"
	"github.com/kube-sunset/sunset/store"
)

const realBatch = "../testdata/apiserver-v1.36/webhook-metadata-batch/00002.body"

func BenchmarkDecode(b *testing.B) {
	body, err := os.ReadFile(realBatch)
	if err != nil {
		b.Fatal(err)
	}
	b.Run("full-auditv1", func(b *testing.B) {
		b.SetBytes(int64(len(body)))
		for b.Loop() {
			var list auditv1.EventList
			if err := json.Unmarshal(body, &list); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(400*b.N)/b.Elapsed().Seconds(), "events/s")
	})
	b.Run("sunset", func(b *testing.B) {
		b.SetBytes(int64(len(body)))
		for b.Loop() {
			if _, _, err := auditjson.DecodeBody(body); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(400*b.N)/b.Elapsed().Seconds(), "events/s")
	})
	// What the webhook runs: item by item from the connection, so that a
	// batch is never held whole.
	b.Run("sunset-stream", func(b *testing.B) {
		b.SetBytes(int64(len(body)))
		for b.Loop() {
			if _, _, err := auditjson.DecodeStream(bytes.NewReader(body), nil); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(400*b.N)/b.Elapsed().Seconds(), "events/s")
	})
}

func BenchmarkCommit(b *testing.B) {
	hour := time.Now().UTC().Truncate(time.Hour)
	for _, group := range []struct {
		name string
		size int
	}{{"one-per-commit", 1}, {"group-400", 400}} {
		b.Run(group.name, func(b *testing.B) {
			s, err := store.Open(store.Options{Dir: b.TempDir(), Logger: zerolog.Nop()})
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			id := 0
			b.ResetTimer()
			for b.Loop() {
				reqs := make([]countkey.Request, group.size)
				for i := range reqs {
					id++
					reqs[i] = countkey.Request{ID: strconv.Itoa(id), Key: countkey.CountKey{
						Cluster: "default",
						API:     "endpoints.v1",
						Cell: countkey.Cell{Hour: hour, Node: "n1", Username: "user-" + strconv.Itoa(id%50), UserAgent: "kubectl/v1.32.4",
							Verb: "get"},
					}}
				}
				if _, err := storetest.Apply(s, reqs); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(group.size*b.N)/b.Elapsed().Seconds(), "events/s")
		})
	}
	b.Run("badger-floor-400", func(b *testing.B) {
		badgerFloor(b, 400)
	})
}

// badgerFloor is the least a durable, deduplicated count must write, with
// badger alone and no Sunset code: for each of size fresh requests per
// transaction, a lookup and a write of its dedupe mark, then a commit and
// an fsync. Sunset's commit also reads and writes the count keys,
// sightings and API metadata, and badger applies every transaction on one
// goroutine, so this bounds the counted requests a second of any path.
func badgerFloor(b *testing.B, size int) {
	db, err := badger.Open(badger.DefaultOptions(b.TempDir()).WithLogger(nil).WithMetricsEnabled(false))
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	id := 0
	mark := []byte("m/default/")
	for b.Loop() {
		txn := db.NewTransaction(true)
		for range size {
			id++
			// A fresh key each time: badger keeps the slice until commit.
			k := fmt.Appendf(mark[:len(mark):len(mark)], "%08d-0123456789abcdef01234567", id)
			if _, err := txn.Get(k); !errors.Is(err, badger.ErrKeyNotFound) {
				b.Fatal(err)
			}
			if err := txn.Set(k, nil); err != nil {
				b.Fatal(err)
			}
		}
		if err := txn.Commit(); err != nil {
			b.Fatal(err)
		}
		if err := db.Sync(); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(size*b.N)/b.Elapsed().Seconds(), "events/s")
}

// startSunset runs a server on a loopback port with a fresh data directory
// and returns its URL and a function that stops it.
func startSunset(b *testing.B, configure func(*config.Config)) (string, func()) {
	b.Helper()
	cfg := testserver.Config(b)
	configure(&cfg)
	s := testserver.Start(b, cfg, app.Options{})
	return s.URL, s.Stop
}
