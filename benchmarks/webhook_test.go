package benchmarks

import (
	"bytes"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	gojson "github.com/goccy/go-json"
	auditv1 "k8s.io/apiserver/pkg/apis/audit/v1"

	"github.com/kube-sunset/sunset/app"
	"github.com/kube-sunset/sunset/internal/auditgen"
	"github.com/kube-sunset/sunset/internal/testpki"
)

// loadSenders is how many apiservers post at once, each on its own
// connection.
const loadSenders = 4

// batchEvents is kube-apiserver's largest webhook batch.
const batchEvents = 400

// loadBatches makes the batches senders post: 400 Metadata events of about
// 1.2 KB, 3 % deprecated. Every post gets fresh auditIDs by overwriting
// the ID prefix in a copy of one template, so that the senders, which
// share the 2 cores with the receiver, spend next to nothing making them.
type loadBatches struct {
	template []byte
	// idAt are the offsets of the template's ID prefixes.
	idAt       []int
	deprecated int
	seq        atomic.Uint32
}

const idPlaceholder = "XXXXXXXX"

func newLoadBatches(at time.Time) *loadBatches {
	gen := auditgen.Options{Prefix: idPlaceholder, DeprecatedEvery: 33, At: at}
	l := &loadBatches{template: gen.List(0, batchEvents), deprecated: gen.CountDeprecated(0, batchEvents)}
	for i := 0; ; {
		j := bytes.Index(l.template[i:], []byte(idPlaceholder))
		if j < 0 {
			break
		}
		l.idAt = append(l.idAt, i+j)
		i += j + len(idPlaceholder)
	}
	if len(l.idAt) != batchEvents {
		panic(fmt.Sprintf("template has %d IDs", len(l.idAt)))
	}
	return l
}

// next fills buf with a batch of fresh auditIDs.
func (l *loadBatches) next(buf []byte) []byte {
	buf = append(buf[:0], l.template...)
	id := fmt.Appendf(nil, "%08x", l.seq.Add(1))
	for _, at := range l.idAt {
		copy(buf[at:], id)
	}
	return buf
}

// loadResult is what one run of the load driver saw.
type loadResult struct {
	batches   int64
	latencies []time.Duration
}

// drive posts b.N batches from loadSenders senders; every answer must be
// 200. With pace, batches start at that rate in all, else as fast as the
// receiver answers.
func drive(b *testing.B, client *http.Client, url string, batches *loadBatches, pace time.Duration) loadResult {
	b.Helper()
	var next atomic.Int64
	var mu sync.Mutex
	res := loadResult{}
	start := time.Now()
	b.ResetTimer()
	var wg sync.WaitGroup
	for range loadSenders {
		wg.Go(func() {
			var buf []byte
			var lat []time.Duration
			for {
				n := next.Add(1)
				if n > int64(b.N) {
					break
				}
				if pace > 0 {
					time.Sleep(time.Until(start.Add(time.Duration(n) * pace)))
				}
				buf = batches.next(buf)
				t0 := time.Now()
				resp, err := client.Post(url, "application/json", bytes.NewReader(buf))
				if err != nil {
					b.Error(err)
					return
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				lat = append(lat, time.Since(t0))
				if resp.StatusCode != http.StatusOK {
					b.Errorf("status %d", resp.StatusCode)
					return
				}
			}
			mu.Lock()
			res.latencies = append(res.latencies, lat...)
			res.batches += int64(len(lat))
			mu.Unlock()
		})
	}
	wg.Wait()
	b.StopTimer()
	b.ReportMetric(float64(batchEvents*res.batches)/b.Elapsed().Seconds(), "events/s")
	slices.Sort(res.latencies)
	if n := len(res.latencies); n > 0 {
		b.ReportMetric(float64(res.latencies[n*99/100].Microseconds())/1000, "p99-ms")
	}
	return res
}

// receiver is a baseline: an HTTP handler that decodes each batch and
// answers 200, storing nothing.
func receiver(decode func([]byte) error) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err == nil {
			err = decode(body)
		}
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		w.WriteHeader(http.StatusOK)
	})
}

// leanEvent is what a decode-only receiver reads with a fast JSON library.
type leanEvent struct {
	AuditID   string `json:"auditID"`
	Stage     string `json:"stage"`
	Verb      string `json:"verb"`
	UserAgent string `json:"userAgent"`
	User      struct {
		Username string `json:"username"`
	} `json:"user"`
	ObjectRef *struct {
		Resource   string `json:"resource"`
		APIGroup   string `json:"apiGroup"`
		APIVersion string `json:"apiVersion"`
	} `json:"objectRef"`
	Annotations map[string]string `json:"annotations"`
}

var baselines = []struct {
	name   string
	decode func([]byte) error
}{
	// The HTTP floor: read the body, answer 200.
	{"read-and-200", func([]byte) error { return nil }},
	// What a typical receiver does: encoding/json into the audit types.
	{"typical-receiver", func(b []byte) error {
		var list auditv1.EventList
		return json.Unmarshal(b, &list)
	}},
	// The decode-only ceiling: goccy/go-json into the fields that count.
	{"decode-only", func(b []byte) error {
		var list struct {
			Items []leanEvent `json:"items"`
		}
		return gojson.Unmarshal(b, &list)
	}},
}

// BenchmarkWebhookLoad posts 400-event batches (3 % deprecated, fresh
// auditIDs) from 4 senders over HTTP/1.1 and over HTTP/2 with TLS, to the
// two baseline receivers and to Sunset, which answers each only once its
// counts are on disk (fsync). After Sunset's runs the driver reads the
// count back and requires it to be exact. sunset-paced offers a steady
// 100k events/s (250 batches/s) and reports the p99 acknowledgement time.
func BenchmarkWebhookLoad(b *testing.B) {
	now := time.Now().UTC()
	ca := testpki.NewCA(b, "bench-ca")
	server := ca.Server(b, "127.0.0.1")
	dir := b.TempDir()
	certFile := testpki.WriteFile(b, dir, "tls.crt", server.CertPEM)
	keyFile := testpki.WriteFile(b, dir, "tls.key", server.KeyPEM)
	for _, proto := range []string{"http1", "h2-tls"} {
		tlsOn := proto == "h2-tls"
		client := func() *http.Client {
			tr := &http.Transport{MaxIdleConnsPerHost: loadSenders, ForceAttemptHTTP2: tlsOn}
			if tlsOn {
				tr.TLSClientConfig = &tls.Config{RootCAs: ca.Pool()}
			}
			return &http.Client{Transport: tr}
		}
		for _, base := range baselines {
			b.Run(proto+"/"+base.name, func(b *testing.B) {
				srv := httptest.NewUnstartedServer(receiver(base.decode))
				if tlsOn {
					srv.EnableHTTP2 = true
					srv.TLS = &tls.Config{Certificates: []tls.Certificate{server.TLS(b)}}
					srv.StartTLS()
				} else {
					srv.Start()
				}
				defer srv.Close()
				drive(b, client(), srv.URL, newLoadBatches(now), 0)
			})
		}
		for _, paced := range []bool{false, true} {
			name := proto + "/sunset"
			pace := time.Duration(0)
			if paced {
				name, pace = proto+"/sunset-paced-100k", time.Second/250
			}
			b.Run(name, func(b *testing.B) {
				url, stop := startSunset(b, func(cfg *app.Config) {
					cfg.MaxInFlightBatches = 64
					if tlsOn {
						cfg.TLSCertFile, cfg.TLSKeyFile = certFile, keyFile
					}
				})
				defer stop()
				batches := newLoadBatches(now)
				c := client()
				res := drive(b, c, url+"/audit/webhook/n1", batches, pace)
				if got, want := requestCount(b, c, url, "endpoints.v1"), res.batches*int64(batches.deprecated); got != want {
					b.Fatalf("Sunset counted %d requests of endpoints.v1; the driver sent %d", got, want)
				}
			})
		}
	}
}

// requestCount reads one API's count over the last 24 hours.
func requestCount(b *testing.B, c *http.Client, url, api string) int64 {
	b.Helper()
	resp, err := c.Get(url + "/apis/sunset.dev/v1/apirequestcounts/" + api)
	if err != nil {
		b.Fatal(err)
	}
	defer resp.Body.Close()
	var obj struct {
		Status struct {
			RequestCount int64 `json:"requestCount"`
		} `json:"status"`
	}
	if resp.StatusCode == http.StatusNotFound {
		return 0
	}
	if err := json.NewDecoder(resp.Body).Decode(&obj); err != nil {
		b.Fatal(err)
	}
	return obj.Status.RequestCount
}
