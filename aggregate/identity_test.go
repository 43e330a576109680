package aggregate

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"
	"github.com/stretchr/testify/require"

	"github.com/kube-sunset/sunset/classify"
	"github.com/kube-sunset/sunset/store"
)

// Five requests with one Audit-ID, received at different instants, are
// five requests; the same five re-sent are duplicates.
func TestRequestsSharingAnAuditIDCountApart(t *testing.T) {
	a, _ := newTest(t)
	events := make([]classify.Event, 5)
	for i := range events {
		events[i] = deprecatedEvent("constant", "mallory")
		events[i].RequestReceived = now.Add(-time.Duration(i+1) * time.Minute)
	}
	sum, err := a.Ingest(context.Background(), classify.Origin{Source: "test", Cluster: "c", Node: "n"}, events)
	require.NoError(t, err)
	require.Equal(t, classify.Summary{Counted: 5}, sum)
	sum, err = a.Ingest(context.Background(), classify.Origin{Source: "test", Cluster: "c", Node: "n"}, events)
	require.NoError(t, err)
	require.Equal(t, classify.Summary{Duplicates: 5}, sum)
}

// kube-apiserver lists the X-Forwarded-For addresses a caller sends before
// the address it saw itself. A caller that forges twelve is still seen
// with its real address, the last, kept first; then the first nine
// forged ones.
func TestSourceIPsKeepTheAddressTheApiserverSaw(t *testing.T) {
	st, err := store.Open(store.Options{Dir: t.TempDir(), Logger: zerolog.Nop(), Now: func() time.Time { return now }, Merge: StoreMerge()})
	require.NoError(t, err)
	a := New(Options{Store: st, Logger: zerolog.Nop(), Registerer: prometheus.NewRegistry(), Now: func() time.Time { return now }})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { a.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done; _ = st.Close() })

	e := deprecatedEvent("xff", "mallory")
	for i := range 12 {
		e.SourceIPs = append(e.SourceIPs, fmt.Sprintf("192.0.2.%d", i+1))
	}
	e.SourceIPs = append(e.SourceIPs, "10.1.2.3")
	sum, err := a.Ingest(context.Background(), classify.Origin{Source: "test", Cluster: "c", Node: "n"}, []classify.Event{e})
	require.NoError(t, err)
	require.Equal(t, 1, sum.Counted)
	w, err := st.Workloads("c", "endpoints.v1")
	require.NoError(t, err)
	var ips []string
	for _, ip := range w[store.ClientID{Username: "mallory", UserAgent: "ua/1"}].SourceIPs {
		ips = append(ips, ip.IP)
	}
	require.Equal(t, []string{"10.1.2.3", "192.0.2.1", "192.0.2.2", "192.0.2.3", "192.0.2.4", "192.0.2.5",
		"192.0.2.6", "192.0.2.7", "192.0.2.8", "192.0.2.9"}, ips)
}
