// Command loadgen sends audit events to Sunset through kube-apiserver's own
// audit webhook backend (k8s.io/apiserver/plugin/pkg/audit/webhook), for the
// tests of the binary in test/. It runs in a process of its own, built
// without the race detector, so that encoding a gigabyte of JSON does not
// slow the tests that run with it.
//
// It sends deprecated requests (v1 Endpoints, each client its own user)
// and prints what happened as JSON: how many events it sent, and how many
// the server acknowledged with a 2xx or were given up on after the retries.
//
//	-mode burst:  each client sends one batch of -events events at once,
//	              all clients together, without the batching layer.
//	-mode stream: each client feeds kube-apiserver's batching layer at
//	              -rate events per second until stdin closes, then flushes.
package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	authnv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	auditinternal "k8s.io/apiserver/pkg/apis/audit"
	auditv1 "k8s.io/apiserver/pkg/apis/audit/v1"
	"k8s.io/apiserver/pkg/audit"
	"k8s.io/apiserver/plugin/pkg/audit/buffered"
	"k8s.io/apiserver/plugin/pkg/audit/webhook"
	"k8s.io/klog/v2"
)

// Summary is what loadgen prints.
type Summary struct {
	// Sent is how many events were handed to the backends.
	Sent int64 `json:"sent"`
	// Acked and Failed count events in batches the server answered 2xx,
	// and in batches given up on after every retry.
	Acked  int64 `json:"acked"`
	Failed int64 `json:"failed"`
	// BodyBytes is the size of one burst batch as the client encodes it.
	BodyBytes int `json:"bodyBytes,omitempty"`
}

func main() {
	var (
		url        = flag.String("url", "", "webhook URL; each client appends /<client>")
		mode       = flag.String("mode", "burst", "burst or stream")
		clients    = flag.Int("clients", 4, "how many apiservers send")
		events     = flag.Int("events", 400, "burst: events per client")
		size       = flag.Int("object-bytes", 0, "size of each event's request object (RequestResponse level); 0 for Metadata level")
		rate       = flag.Int("rate", 1000, "stream: events per second per client")
		prefix     = flag.String("prefix", "load", "auditID prefix")
		retry      = flag.Duration("retry", 100*time.Millisecond, "first retry backoff (kube-apiserver: 10s)")
		retrySteps = flag.Int("retry-steps", 12, "attempts per batch (kube-apiserver: 5)")
	)
	flag.Parse()
	klog.SetOutput(io.Discard)
	klog.LogToStderr(false)
	if err := run(*url, *mode, *clients, *events, *size, *rate, *prefix, wait.Backoff{Duration: *retry, Factor: 1.5, Jitter: 0.2, Steps: *retrySteps}); err != nil {
		fmt.Fprintln(os.Stderr, "loadgen:", err)
		os.Exit(1)
	}
}

// counting passes batches to the webhook backend and counts the outcome.
type counting struct {
	audit.Backend
	sum *Summary
}

func (c counting) ProcessEvents(ev ...*auditinternal.Event) bool {
	ok := c.Backend.ProcessEvents(ev...)
	if ok {
		atomic.AddInt64(&c.sum.Acked, int64(len(ev)))
	} else {
		atomic.AddInt64(&c.sum.Failed, int64(len(ev)))
	}
	return ok
}

func run(url, mode string, clients, events, size, rate int, prefix string, retry wait.Backoff) error {
	sum := &Summary{}
	backends := make([]audit.Backend, clients)
	for i := range backends {
		b, err := newBackend(fmt.Sprintf("%s/node-%d", url, i), retry)
		if err != nil {
			return err
		}
		backends[i] = counting{Backend: b, sum: sum}
	}
	var object []byte
	if size > 0 {
		object = []byte(`{"kind":"ConfigMap","apiVersion":"v1","metadata":{"name":"big","namespace":"default"},"data":{"blob":"` +
			strings.Repeat("x", max(size-100, 0)) + `"}}`)
	}
	switch mode {
	case "burst":
		batches := make([][]*auditinternal.Event, clients)
		for i := range batches {
			for j := 0; j < events; j++ {
				batches[i] = append(batches[i], event(fmt.Sprintf("%s-%d-%d", prefix, i, j), i, object))
			}
		}
		n, err := encodedSize(batches[0])
		if err != nil {
			return err
		}
		sum.BodyBytes = n
		var wg sync.WaitGroup
		for i, b := range backends {
			wg.Add(1)
			go func() {
				defer wg.Done()
				b.ProcessEvents(batches[i]...)
			}()
		}
		wg.Wait()
		sum.Sent = int64(clients * events)
	case "stream":
		stop := make(chan struct{})
		go func() {
			_, _ = io.Copy(io.Discard, bufio.NewReader(os.Stdin))
			close(stop)
		}()
		var wg sync.WaitGroup
		for i, d := range backends {
			b := buffered.NewBackend(d, buffered.BatchConfig{
				BufferSize: 10000, MaxBatchSize: 400, MaxBatchWait: 100 * time.Millisecond,
				ThrottleEnable: true, ThrottleQPS: 10, ThrottleBurst: 15, AsyncDelegate: true,
			})
			bStop := make(chan struct{})
			if err := b.Run(bStop); err != nil {
				return err
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				tick := time.NewTicker(time.Second / time.Duration(rate))
				defer tick.Stop()
				for j := 0; ; j++ {
					select {
					case <-stop:
						close(bStop)
						b.Shutdown()
						return
					case <-tick.C:
						b.ProcessEvents(event(fmt.Sprintf("%s-%d-%d", prefix, i, j), i, object))
						atomic.AddInt64(&sum.Sent, 1)
					}
				}
			}()
		}
		wg.Wait()
	default:
		return fmt.Errorf("-mode %q is not burst or stream", mode)
	}
	return json.NewEncoder(os.Stdout).Encode(sum)
}

// newBackend is kube-apiserver's webhook backend, configured through a
// webhook kubeconfig file as an apiserver is.
func newBackend(url string, retry wait.Backoff) (audit.Backend, error) {
	dir, err := os.MkdirTemp("", "loadgen")
	if err != nil {
		return nil, err
	}
	kubeconfig := filepath.Join(dir, "webhook.kubeconfig")
	if err := os.WriteFile(kubeconfig, []byte(`apiVersion: v1
kind: Config
clusters:
- name: sunset
  cluster:
    server: `+url+`
contexts:
- name: sunset
  context: {cluster: sunset, user: apiserver}
current-context: sunset
users:
- name: apiserver
  user: {}
`), 0o600); err != nil {
		return nil, err
	}
	defer func() { _ = os.RemoveAll(dir) }()
	return webhook.NewBackend(kubeconfig, auditv1.SchemeGroupVersion, retry, nil)
}

// event is one deprecated request, completed, as kube-apiserver audits it;
// with an object, at RequestResponse level.
func event(id string, client int, object []byte) *auditinternal.Event {
	now := metav1.NewMicroTime(time.Now())
	e := &auditinternal.Event{
		Level: auditinternal.LevelMetadata, AuditID: types.UID(id), Stage: auditinternal.StageResponseComplete,
		Verb: "update", RequestURI: "/api/v1/namespaces/default/endpoints/big",
		User:      authnv1.UserInfo{Username: fmt.Sprintf("system:serviceaccount:ci:writer-%d", client), Groups: []string{"system:authenticated"}},
		SourceIPs: []string{"10.1.2.3"}, UserAgent: "loadgen/1.0",
		ObjectRef:                &auditinternal.ObjectReference{Resource: "endpoints", Namespace: "default", Name: "big", APIVersion: "v1"},
		ResponseStatus:           &metav1.Status{Code: 200},
		RequestReceivedTimestamp: now, StageTimestamp: now,
		Annotations: map[string]string{"k8s.io/deprecated": "true"},
	}
	if object != nil {
		e.Level = auditinternal.LevelRequestResponse
		e.RequestObject = &runtime.Unknown{Raw: object, ContentType: runtime.ContentTypeJSON}
	}
	return e
}

// encodedSize is the size of the EventList the webhook client sends.
func encodedSize(events []*auditinternal.Event) (int, error) {
	list := &auditinternal.EventList{}
	for _, e := range events {
		list.Items = append(list.Items, *e)
	}
	b, err := runtime.Encode(audit.Codecs.LegacyCodec(auditv1.SchemeGroupVersion), list)
	return len(b), err
}
