package benchmarks

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	badger "github.com/dgraph-io/badger/v4"
	"github.com/rs/zerolog"
	kafkago "github.com/segmentio/kafka-go"

	"github.com/kube-sunset/sunset/ingest/kafka"
	"github.com/kube-sunset/sunset/store"
)

// maxFloorCommit is the most marks one transaction of the floor writes,
// as the store's chunks do.
const maxFloorCommit = 4096

// TestFleetFloorProcess is not a test of its own: BenchmarkFleet starts the
// test binary with it, as a process beside the counting replica, to
// measure the replica's floor the way it measures the replica. It reads
// every partition of the fleet's topic with bare kafka-go readers (the
// replica's fetch settings) and, for each record, does the least a
// deduplicated durable count needs: looks up and writes a dedupe mark
// named by the record's key (cluster and auditID) in badger, with the
// options Sunset opens its store with, fsynced per transaction. No record
// is decoded and no count, sighting or cursor is written. After each
// commit it prints how many records it has committed.
func TestFleetFloorProcess(t *testing.T) {
	topic := os.Getenv("SUNSET_BENCH_FLOOR_TOPIC")
	if topic == "" {
		t.Skip("BenchmarkFleet runs it as a process of its own")
	}
	db, err := badger.Open(store.BadgerOptions(t.TempDir()).WithSyncWrites(true))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	cfg := kafka.Config{Brokers: strings.Split(os.Getenv("SUNSET_BENCH_FLOOR_BROKERS"), ",")}.WithDefaults()
	fetched := make(chan kafkago.Message, maxFloorCommit)
	for p := range fleetPartitions {
		r := kafka.NewPartitionReader(cfg, &kafkago.Dialer{}, topic, p, zerolog.Nop())
		defer r.Close()
		go func() {
			for {
				m, err := r.ReadMessage(context.Background())
				if err != nil {
					return
				}
				fetched <- m
			}
		}()
	}
	committed := 0
	for m := range fetched {
		txn := db.NewTransaction(true)
		n := 0
		for {
			mark := append([]byte{'m'}, m.Key...)
			if _, err := txn.Get(mark); !errors.Is(err, badger.ErrKeyNotFound) {
				t.Fatalf("record %s: the mark lookup found %v", m.Key, err)
			}
			if err := txn.Set(mark, nil); err != nil {
				t.Fatal(err)
			}
			if n++; n == maxFloorCommit {
				break
			}
			select {
			case m = <-fetched:
				continue
			default:
			}
			break
		}
		if err := txn.Commit(); err != nil {
			t.Fatal(err)
		}
		committed += n
		fmt.Println(committed)
	}
}

// floorProc is the floor process of TestFleetFloorProcess, running.
type floorProc struct {
	sunsetProc
	committed atomic.Int64
}

// startFloor starts the floor process on the fleet's topic.
func startFloor(b *testing.B, brokers []string, topic string) *floorProc {
	cmd := exec.Command(os.Args[0], "-test.run=^TestFleetFloorProcess$", "-test.count=1")
	cmd.Env = append(os.Environ(), "SUNSET_BENCH_FLOOR_TOPIC="+topic, "SUNSET_BENCH_FLOOR_BROKERS="+strings.Join(brokers, ","))
	out, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	f := &floorProc{sunsetProc: sunsetProc{cmd: cmd}}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	go func() {
		lines := bufio.NewScanner(out)
		for lines.Scan() {
			if n, err := strconv.ParseInt(lines.Text(), 10, 64); err == nil {
				f.committed.Store(n)
			}
		}
	}()
	return f
}
