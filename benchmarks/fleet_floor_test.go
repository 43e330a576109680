package benchmarks

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	badger "github.com/dgraph-io/badger/v4"
	"github.com/rs/zerolog"
	kafkago "github.com/segmentio/kafka-go"

	"github.com/kube-sunset/sunset/ingest/kafka"
	"github.com/kube-sunset/sunset/store"
)

// The floor process's settings, passed in its environment. Not SUNSET_*:
// the sunset processes of the benchmark inherit the environment, and
// Sunset refuses a variable of its prefix that it does not know.
const (
	floorTopicEnv   = "BENCH_FLOOR_TOPIC"
	floorBrokersEnv = "BENCH_FLOOR_BROKERS"
	floorDirEnv     = "BENCH_FLOOR_DIR"
	// floorProfileEnv, set when the benchmark runs, names a file for the
	// floor's CPU profile from the end of the first round on.
	floorProfileEnv = "BENCH_FLOOR_CPUPROFILE"
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
// options Sunset opens its store with, fsynced per transaction. Like the
// replica it waits up to kafka.batchWait for a transaction to fill. No
// record is decoded and no count, sighting or cursor is written. After
// each commit it prints how many distinct records it has committed; it
// stops when its standard input closes.
func TestFleetFloorProcess(t *testing.T) {
	topic := os.Getenv(floorTopicEnv)
	if topic == "" {
		t.Skip("BenchmarkFleet runs it as a process of its own")
	}
	db, err := badger.Open(store.BadgerOptions(os.Getenv(floorDirEnv)).WithSyncWrites(true))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		_, _ = io.Copy(io.Discard, os.Stdin)
		cancel()
	}()
	cfg := kafka.Config{Brokers: strings.Split(os.Getenv(floorBrokersEnv), ",")}.WithDefaults()
	fetched := make(chan kafkago.Message, maxFloorCommit)
	for p := range fleetPartitions {
		r := kafka.NewPartitionReader(cfg, &kafkago.Dialer{}, topic, p, zerolog.Nop())
		defer r.Close()
		go func() {
			for {
				m, err := r.ReadMessage(ctx)
				if err != nil {
					if ctx.Err() == nil {
						fmt.Fprintf(os.Stderr, "reading partition %d: %v\n", p, err)
					}
					return
				}
				fetched <- m
			}
		}()
	}
	profile := os.Getenv(floorProfileEnv)
	committed := 0
	for {
		var batch []kafkago.Message
		select {
		case m := <-fetched:
			batch = append(batch, m)
		case <-ctx.Done():
			return
		}
		wait := time.NewTimer(cfg.BatchWait)
	fill:
		for len(batch) < maxFloorCommit {
			select {
			case m := <-fetched:
				batch = append(batch, m)
			case <-wait.C:
				break fill
			}
		}
		wait.Stop()
		n, err := writeMarks(db, batch)
		if err != nil {
			t.Fatal(err)
		}
		committed += n
		fmt.Println(committed)
		if profile != "" && committed >= fleetRawMessages {
			f, err := os.Create(profile)
			if err != nil {
				t.Fatal(err)
			}
			if err := pprof.StartCPUProfile(f); err != nil {
				t.Fatal(err)
			}
			defer func() { pprof.StopCPUProfile(); _ = f.Close() }()
			profile = ""
		}
	}
}

// writeMarks writes, in one fsynced transaction, the dedupe mark of every
// record of batch whose mark is not stored yet, and returns how many.
func writeMarks(db *badger.DB, batch []kafkago.Message) (int, error) {
	txn := db.NewTransaction(true)
	defer txn.Discard()
	n := 0
	for _, m := range batch {
		mark := append([]byte{'m'}, m.Key...)
		_, err := txn.Get(mark)
		if err == nil {
			continue // a copy the filter produced again
		}
		if !errors.Is(err, badger.ErrKeyNotFound) {
			return 0, err
		}
		if err := txn.Set(mark, nil); err != nil {
			return 0, err
		}
		n++
	}
	return n, txn.Commit()
}

// floorProc is the floor process of TestFleetFloorProcess, running.
type floorProc struct {
	sunsetProc
	committed atomic.Int64
}

// startFloor starts the floor process on the fleet's topic; it stops when
// the benchmark ends.
func startFloor(b *testing.B, brokers []string, topic string) *floorProc {
	cmd := exec.Command(os.Args[0], "-test.run=^TestFleetFloorProcess$", "-test.count=1")
	cmd.Env = append(os.Environ(), floorTopicEnv+"="+topic, floorBrokersEnv+"="+strings.Join(brokers, ","), floorDirEnv+"="+b.TempDir())
	f := &floorProc{sunsetProc: sunsetProc{cmd: cmd, log: &bytes.Buffer{}}}
	cmd.Stderr = f.log
	stdin, err := cmd.StdinPipe()
	if err != nil {
		b.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	exited := make(chan struct{})
	go func() {
		lines := bufio.NewScanner(out)
		for lines.Scan() {
			if n, err := strconv.ParseInt(lines.Text(), 10, 64); err == nil {
				f.committed.Store(n)
			}
		}
		_ = cmd.Wait()
		close(exited)
	}()
	// Closing its input stops it, its profile written; it gets 10 s.
	b.Cleanup(func() {
		_ = stdin.Close()
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
	})
	return f
}
