package benchmarks

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	kafkago "github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/kube-sunset/sunset/internal/testutil/kafkatest"
	"github.com/kube-sunset/sunset/internal/testutil/loopback"
)

const (
	fleetRawMessages = 30000
	fleetPartitions  = 6
)

// fleetMessages are raw audit events from 5 clusters of 3 apiservers, as a
// shipper sends them (cluster and hostname beside the event). One in 20 is
// a deprecated request (every one with deprecatedEvery 1); the rest are
// ordinary traffic. Messages of different rounds have different auditIDs.
func fleetMessages(now time.Time, deprecatedEvery, round int) []kafkago.Message {
	msgs := make([]kafkago.Message, fleetRawMessages)
	ts := now.Format(time.RFC3339Nano)
	for i := range msgs {
		resource, ann := "pods", `"authorization.k8s.io/decision":"allow","authorization.k8s.io/reason":"RBAC: allowed by ClusterRoleBinding \"system:controller:replicaset-controller\""`
		if i%deprecatedEvery == 0 {
			resource, ann = "endpoints", `"k8s.io/deprecated":"true","authorization.k8s.io/decision":"allow"`
		}
		cluster := fmt.Sprintf("cluster-%d", i%5)
		id := fmt.Sprintf("%08x-bench-%04d-8000-%012d", i, 4000+round, i)
		msgs[i] = kafkago.Message{Key: []byte(id), Value: []byte(fmt.Sprintf(`{"kind":"Event","apiVersion":"audit.k8s.io/v1","level":"Metadata","auditID":%q,"stage":"ResponseComplete","requestURI":"/api/v1/namespaces/ns-%d/%s?limit=500","verb":"list","user":{"username":"system:serviceaccount:ns-%d:controller","uid":"7d2c4f0e-1b5a-4c1e-9f4e-0a1b2c3d4e5f","groups":["system:serviceaccounts","system:serviceaccounts:ns-%d","system:authenticated"],"extra":{"authentication.kubernetes.io/pod-name":["controller-6d4cf56db6-x7x2z"],"authentication.kubernetes.io/node-name":["worker-%d"]}},"sourceIPs":["10.128.%d.%d"],"userAgent":"controller/v1.2.3 (linux/amd64) kubernetes/abcdef","objectRef":{"resource":%q,"namespace":"ns-%d","apiVersion":"v1"},"responseStatus":{"metadata":{},"code":200},"requestReceivedTimestamp":%q,"stageTimestamp":%q,"annotations":{%s},"cluster":%q,"hostname":"%s-master-%d"}`,
			id, i%40, resource, i%40, i%40, i%9, i%200, i%250, resource, i%40, ts, ts, ann, cluster, cluster, i%3))}
	}
	return msgs
}

// sunsetProc is a `sunset serve` process.
type sunsetProc struct {
	cmd *exec.Cmd
	url string
	log *bytes.Buffer
}

// startProc starts `sunset serve` on a loopback port with the config file
// config ("" for none) and env added to the environment.
func startProc(b *testing.B, bin, config string, env ...string) *sunsetProc {
	b.Helper()
	addr := loopback.FreeAddr(b)
	args := []string{"serve", "--data-dir", b.TempDir(), "--listen", addr, "--log-level", "warn"}
	if config != "" {
		args = append(args, "--config", config)
	}
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), env...)
	// Kept, not printed: warnings would break the benchmark's output
	// lines; stop shows them when the process fails.
	p := &sunsetProc{cmd: cmd, url: "http://" + addr, log: &bytes.Buffer{}}
	cmd.Stderr = p.log
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	return p
}

// waitReady polls /-/ready: for a counting replica that means counted up
// to where the fleet's topic ended at its start.
func (p *sunsetProc) waitReady(b *testing.B) {
	b.Helper()
	err := wait.PollUntilContextTimeout(context.Background(), 5*time.Millisecond, 2*time.Minute, true, func(context.Context) (bool, error) {
		resp, err := http.Get(p.url + "/-/ready")
		if err != nil {
			return false, nil
		}
		resp.Body.Close()
		return resp.StatusCode == 200, nil
	})
	if err != nil {
		_ = p.cmd.Process.Kill()
		_ = p.cmd.Wait() // so that its log is complete and no longer written
		b.Fatalf("sunset not ready: %v\n%s", err, p.log)
	}
}

// cpu is the process's user and system CPU time so far.
func (p *sunsetProc) cpu(b *testing.B) time.Duration {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", p.cmd.Process.Pid))
	if err != nil {
		b.Fatal(err)
	}
	// Fields after the command name, which is in parentheses: utime and
	// stime are the 12th and 13th, in clock ticks of 1/100 s on Linux.
	fields := strings.Fields(string(raw[strings.LastIndexByte(string(raw), ')')+2:]))
	utime, _ := strconv.ParseInt(fields[11], 10, 64)
	stime, _ := strconv.ParseInt(fields[12], 10, 64)
	return time.Duration(utime+stime) * 10 * time.Millisecond
}

func (p *sunsetProc) stop(b *testing.B) {
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	if err := p.cmd.Wait(); err != nil {
		b.Fatalf("sunset exited: %v\n%s", err, p.log)
	}
}

// topicBytes is what the broker holds for topic: the record batches as
// produced, compressed or not.
func topicBytes(b *testing.B, brokers []string, topic string) int64 {
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	if err != nil {
		b.Fatal(err)
	}
	defer cl.Close()
	req := kmsg.NewPtrDescribeLogDirsRequest()
	rt := kmsg.NewDescribeLogDirsRequestTopic()
	rt.Topic = topic
	for p := range int32(fleetPartitions) {
		rt.Partitions = append(rt.Partitions, p)
	}
	req.Topics = append(req.Topics, rt)
	shards := cl.RequestSharded(context.Background(), req)
	var total int64
	for _, s := range shards {
		if s.Err != nil {
			b.Fatal(s.Err)
		}
		for _, d := range s.Resp.(*kmsg.DescribeLogDirsResponse).Dirs {
			for _, t := range d.Topics {
				for _, p := range t.Partitions {
					total += p.Size
				}
			}
		}
	}
	return total
}

// requestCount is an API's requests over the last day, as a process
// answers; 0 until it has any.
func (p *sunsetProc) requestCount(api string) int64 {
	resp, err := http.Get(p.url + "/apis/sunset.dev/v1/apirequestcounts/" + api)
	if err != nil {
		return 0
	}
	defer resp.Body.Close()
	var obj struct{ Status struct{ RequestCount int64 } }
	if resp.StatusCode != 200 || json.NewDecoder(resp.Body).Decode(&obj) != nil {
		return 0
	}
	return obj.Status.RequestCount
}

// BenchmarkFleet measures the filter role with 1, 2 and 3 replicas (separate
// `sunset serve` processes in one group, with counting off) and one more
// process that only counts the fleet's topic, beside, in the same run,
// producing alone and one process counting the raw topic the way Sunset
// did before fleet mode (classic-1). Processes join first; the clock runs
// from the first raw message produced until the counting process answers
// with all of them, so producing is inside every figure (produce-only
// shows how much).
//
// Beside msgs/s each reports CPU per raw message (from /proc): filter-cpu
// for the filters together, count-cpu for the counting process, and the
// fleet topic's size per raw message as the broker holds it (lz4 record
// batches) next to the raw message's size.
//
// Every process shares the machine's cores with the in-process broker and
// the producer: on 2 cores more replicas cannot add throughput, so the CPU
// per raw message, not msgs/s, is what sizing rests on.
func BenchmarkFleet(b *testing.B) {
	bin := filepath.Join(b.TempDir(), "sunset")
	if out, err := exec.Command("go", "build", "-o", bin, "../cmd/sunset").CombinedOutput(); err != nil {
		b.Fatalf("building sunset: %v\n%s", err, out)
	}
	brokers := kafkatest.Brokers(b)
	msgs := fleetMessages(time.Now().UTC(), 20, 0)
	const deprecated = fleetRawMessages / 20
	config := func(body string) string {
		f := filepath.Join(b.TempDir(), "sunset.yaml")
		if err := os.WriteFile(f, []byte("kafka:\n  brokers: ["+strings.Join(brokers, ", ")+"]\n  sessionTimeout: 2s\n  nodeField: hostname\n  clusterField: cluster\n"+body), 0o600); err != nil {
			b.Fatal(err)
		}
		return f
	}
	// produce writes msgs from one writer per partition's share, lz4
	// compressed as shippers send them.
	produce := func(b *testing.B, topic string, msgs []kafkago.Message) {
		var wg sync.WaitGroup
		for i := range fleetPartitions {
			wg.Go(func() {
				kafkatest.Produce(b, brokers, topic, kafkago.Lz4, msgs[i*len(msgs)/fleetPartitions:(i+1)*len(msgs)/fleetPartitions]...)
			})
		}
		wg.Wait()
	}
	perMsg := func(b *testing.B, d time.Duration) float64 {
		return float64(d.Microseconds()) / float64(fleetRawMessages*b.N)
	}

	b.Run("produce-only", func(b *testing.B) {
		for range b.N {
			b.StopTimer()
			raw := kafkatest.Topic(b, brokers, "fleet-raw", fleetPartitions)
			b.StartTimer()
			produce(b, raw, msgs)
		}
		b.ReportMetric(float64(fleetRawMessages*b.N)/b.Elapsed().Seconds(), "msgs/s")
	})

	// run starts the filters (or the classic consumer) and the counter on
	// fresh topics, and times producing until the counter has it all.
	run := func(b *testing.B, filters int, classic bool) (filterCPU, countCPU time.Duration, fleetBytes int64) {
		raw := kafkatest.Topic(b, brokers, "fleet-raw", fleetPartitions)
		requests := kafkatest.Topic(b, brokers, "sunset.requests", fleetPartitions)
		group := "bench-" + raw
		body := fmt.Sprintf("  topics: [%s]\n  groupID: %s\n  fleet:\n    topic: %s\n    count: false\n", raw, group, requests)
		if classic {
			body = fmt.Sprintf("  topics: [%s]\n  groupID: %s\n", raw, group)
		}
		procs := make([]*sunsetProc, filters)
		for i := range procs {
			procs[i] = startProc(b, bin, config(body))
		}
		counter := procs[0]
		if !classic {
			counter = startProc(b, bin, config("  fleet:\n    topic: "+requests+"\n"))
			procs = append(procs, counter)
		}
		before := make([]time.Duration, len(procs))
		for i, p := range procs {
			p.waitReady(b)
			before[i] = p.cpu(b)
		}
		b.StartTimer()
		produce(b, raw, msgs)
		err := wait.PollUntilContextTimeout(context.Background(), 5*time.Millisecond, 5*time.Minute, true, func(context.Context) (bool, error) {
			return counter.requestCount("endpoints.v1") == deprecated, nil
		})
		b.StopTimer()
		if err != nil {
			b.Fatal("the counter never showed every request:", err)
		}
		for i, p := range procs {
			used := p.cpu(b) - before[i]
			if p == counter && !classic {
				countCPU += used
			} else {
				filterCPU += used
			}
			p.stop(b)
		}
		if !classic {
			fleetBytes = topicBytes(b, brokers, requests)
		}
		return filterCPU, countCPU, fleetBytes
	}

	b.Run("classic-1", func(b *testing.B) {
		b.StopTimer()
		var cpu time.Duration
		for range b.N {
			c, _, _ := run(b, 1, true)
			cpu += c
		}
		b.ReportMetric(float64(fleetRawMessages*b.N)/b.Elapsed().Seconds(), "msgs/s")
		b.ReportMetric(perMsg(b, cpu), "cpu-us/msg")
	})
	for n := 1; n <= 3; n++ {
		b.Run(fmt.Sprintf("filter-%d", n), func(b *testing.B) {
			b.StopTimer()
			var filterCPU, countCPU time.Duration
			var fleetBytes int64
			for range b.N {
				f, c, bytes := run(b, n, false)
				filterCPU, countCPU, fleetBytes = filterCPU+f, countCPU+c, fleetBytes+bytes
			}
			b.ReportMetric(float64(fleetRawMessages*b.N)/b.Elapsed().Seconds(), "msgs/s")
			b.ReportMetric(perMsg(b, filterCPU), "filter-cpu-us/msg")
			b.ReportMetric(perMsg(b, countCPU), "count-cpu-us/msg")
			b.ReportMetric(float64(fleetBytes)/float64(fleetRawMessages*b.N), "fleet-bytes/msg")
			b.ReportMetric(float64(len(msgs[0].Key)+len(msgs[0].Value)), "raw-bytes/msg")
		})
	}

	// count-only: one process counting a fleet's topic of 30,000 records
	// (a filter wrote them from events that all count), timed from its
	// start until it is ready, that is, has counted all of it.
	b.Run("count-only", func(b *testing.B) {
		b.StopTimer()
		all := fleetMessages(time.Now().UTC(), 1, 0)
		raw := kafkatest.Topic(b, brokers, "fleet-raw", fleetPartitions)
		requests := kafkatest.Topic(b, brokers, "sunset.requests", fleetPartitions)
		filter := startProc(b, bin, config(fmt.Sprintf("  topics: [%s]\n  groupID: fill-%[1]s\n  fleet:\n    topic: %s\n    count: false\n", raw, requests)))
		filter.waitReady(b)
		produce(b, raw, all)
		err := wait.PollUntilContextTimeout(context.Background(), 10*time.Millisecond, 5*time.Minute, true, func(ctx context.Context) (bool, error) {
			return kafkatest.GroupCommitted(ctx, brokers, "fill-"+raw, raw, fleetPartitions)
		})
		if err != nil {
			b.Fatal(err)
		}
		filter.stop(b)
		// The same process on an empty fleet topic: its start-up, which
		// the per-record cost should not carry.
		empty := kafkatest.Topic(b, brokers, "sunset.requests-empty", fleetPartitions)
		var cpu, startup time.Duration
		for range b.N {
			b.StartTimer()
			p := startProc(b, bin, config("  fleet:\n    topic: "+requests+"\n"))
			p.waitReady(b)
			b.StopTimer()
			if got := p.requestCount("endpoints.v1"); got != fleetRawMessages {
				b.Fatalf("counted %d of %d", got, fleetRawMessages)
			}
			cpu += p.cpu(b)
			p.stop(b)
			idle := startProc(b, bin, config("  fleet:\n    topic: "+empty+"\n"))
			idle.waitReady(b)
			startup += idle.cpu(b)
			idle.stop(b)
		}
		b.ReportMetric(float64(fleetRawMessages*b.N)/b.Elapsed().Seconds(), "records/s")
		b.ReportMetric(perMsg(b, cpu), "cpu-us/record")
		b.ReportMetric(perMsg(b, cpu-startup), "net-cpu-us/record")
	})

	// count-steady: a counting replica that has already counted a round
	// of 30,000 records (every event counts), timed over the next rounds
	// only: the CPU per record of a replica that has been running, as in
	// production, without the start-up and the young heap's growth that
	// count-only carries. The filter runs in its own process. Beside the
	// replica, the floor process (TestFleetFloorProcess) reads the same
	// records and writes only their dedupe marks, measured the same way:
	// extra-cpu-us is what the replica spends beyond that floor.
	b.Run("count-steady", func(b *testing.B) {
		b.StopTimer()
		raw := kafkatest.Topic(b, brokers, "fleet-raw", fleetPartitions)
		requests := kafkatest.Topic(b, brokers, "sunset.requests", fleetPartitions)
		filter := startProc(b, bin, config(fmt.Sprintf("  topics: [%s]\n  groupID: fill-%[1]s\n  fleet:\n    topic: %s\n    count: false\n", raw, requests)))
		counter := startProc(b, bin, config("  fleet:\n    topic: "+requests+"\n"))
		floor := startFloor(b, brokers, requests)
		filter.waitReady(b)
		counter.waitReady(b)
		round := func(n int) {
			produce(b, raw, fleetMessages(time.Now().UTC(), 1, n))
			// Each look builds endpoints.v1's object in the replica, whose
			// CPU is the measure: at 5 ms they cost it 7 % of the CPU.
			err := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, 5*time.Minute, true, func(context.Context) (bool, error) {
				want := int64((n + 1) * fleetRawMessages)
				return counter.requestCount("endpoints.v1") == want && floor.committed.Load() == want, nil
			})
			if err != nil {
				b.Fatalf("round %d: the replica counted %d and the floor %d, not %d: %v\nthe floor's log:\n%s", n,
					counter.requestCount("endpoints.v1"), floor.committed.Load(), (n+1)*fleetRawMessages, err, floor.log)
			}
		}
		round(0)
		var cpu, floorCPU time.Duration
		for i := range b.N {
			before, floorBefore := counter.cpu(b), floor.cpu(b)
			b.StartTimer()
			round(i + 1)
			b.StopTimer()
			cpu += counter.cpu(b) - before
			floorCPU += floor.cpu(b) - floorBefore
		}
		filter.stop(b)
		counter.stop(b)
		b.ReportMetric(float64(fleetRawMessages*b.N)/b.Elapsed().Seconds(), "records/s")
		b.ReportMetric(perMsg(b, cpu), "cpu-us/record")
		b.ReportMetric(perMsg(b, floorCPU), "floor-cpu-us/record")
		b.ReportMetric(perMsg(b, cpu-floorCPU), "extra-cpu-us/record")
	})
}
