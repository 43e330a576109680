package aggregate

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"
	"github.com/stretchr/testify/require"

	"github.com/kube-sunset/sunset/store"
)

// Five requests with one Audit-ID, received at different instants, are
// five requests; the same five re-sent are duplicates.
func TestRequestsSharingAnAuditIDCountApart(t *testing.T) {
	a, _ := newTest(t)
	events := make([]Event, 5)
	for i := range events {
		events[i] = deprecatedEvent("constant", "mallory")
		events[i].RequestReceived = now.Add(-time.Duration(i+1) * time.Minute)
	}
	sum, err := a.Ingest(context.Background(), Origin{Source: "test", Cluster: "c", Node: "n"}, events)
	require.NoError(t, err)
	require.Equal(t, Summary{Counted: 5}, sum)
	sum, err = a.Ingest(context.Background(), Origin{Source: "test", Cluster: "c", Node: "n"}, events)
	require.NoError(t, err)
	require.Equal(t, Summary{Duplicates: 5}, sum)
}

// sourceIPs leaves out values too long to be an address, the real one
// included: it is still a sender's string.
func TestSourceIPsLeaveOutValuesNoAddressHas(t *testing.T) {
	require.Equal(t, []string{"10.0.0.1"}, sourceIPs([]string{"10.0.0.1", strings.Repeat("9", 65)}))
	require.Equal(t, []string{"10.0.0.2", "10.0.0.1"}, sourceIPs([]string{"10.0.0.1", strings.Repeat("9", 65), "10.0.0.2"}))
	require.Nil(t, sourceIPs(nil))
}

func TestRequestIDIsBoundedAndUnambiguous(t *testing.T) {
	at := time.Date(2026, 11, 21, 19, 18, 3, 123456000, time.UTC)
	require.Equal(t, "1795288683123456000/a1", RequestID("a1", at))
	require.Equal(t, "/a1", RequestID("a1", time.Time{}))
	// The time's digits never run into the ID.
	require.NotEqual(t, RequestID("1/a", time.Time{}), RequestID("a", time.Unix(0, 1)))
	long := RequestID(strings.Repeat("A", 70000), at)
	require.Len(t, long, len("sha256:")+64)
	require.NotEqual(t, long, RequestID(strings.Repeat("A", 69999), at))
	require.Equal(t, long, RequestID(strings.Repeat("A", 70000), at))
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
	sum, err := a.Ingest(context.Background(), Origin{Source: "test", Cluster: "c", Node: "n"}, []Event{e})
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

// Only a time a replay's shift can have kept names a request: one after
// its received time, off by part of an hour, or before 1970 (where
// UnixNano wraps) is a sender's invention, and the received time is used.
func TestIdentityTimeOnlyFromAShift(t *testing.T) {
	received := time.Date(2026, 11, 23, 13, 18, 3, 123456000, time.UTC)
	for _, tc := range []struct {
		name     string
		original time.Time
		want     time.Time
	}{
		{"none", time.Time{}, received},
		{"shifted 43h", received.Add(-43 * time.Hour), received.Add(-43 * time.Hour)},
		{"not shifted", received, received},
		{"later than received", received.Add(time.Hour), received},
		{"part of an hour", received.Add(-90 * time.Minute), received},
		{"before 1970", time.Date(1600, 1, 1, 0, 0, 0, 0, time.UTC), received},
	} {
		e := Event{ID: "a1", RequestReceived: received, IdentityTime: tc.original}
		require.Equal(t, RequestID("a1", tc.want), e.identity(), tc.name)
	}
}
