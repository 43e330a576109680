package admission

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

type testEvent struct {
	AuditID     string                     `json:"auditID"`
	Stage       string                     `json:"stage"`
	Annotations map[string]json.RawMessage `json:"annotations"`
}

func readEvents(t *testing.T, path string) ([]testEvent, [][]byte) {
	t.Helper()
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	var events []testEvent
	var lines [][]byte
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		var e testEvent
		require.NoError(t, json.Unmarshal(sc.Bytes(), &e))
		events = append(events, e)
		lines = append(lines, bytes.Clone(sc.Bytes()))
	}
	require.NoError(t, sc.Err())
	return events, lines
}

func ms(n float64) time.Duration { return time.Duration(n * float64(time.Millisecond)) }

// Every shape of testdata/crafted-events.jsonl (see its README), line by
// line.
func TestParseCraftedShapes(t *testing.T) {
	events, lines := readEvents(t, "testdata/crafted-events.jsonl")
	want := []*Facts{
		nil, // RequestReceived: no annotations
		{Calls: []Call{
			{Type: Mutating, Configuration: "istio-sidecar-injector", Webhook: "sidecar-injector.istio.io", Round: 0, Index: 0, Mutated: true},
			{Type: Mutating, Configuration: "pod-defaults", Webhook: "defaults.pods.example.com", Round: 0, Index: 3},
			{Type: Mutating, Configuration: "istio-sidecar-injector", Webhook: "sidecar-injector.istio.io", Round: 1, Index: 0},
		}, MutatingLatency: 1700 * time.Millisecond, ValidatingLatency: ms(20.5)},
		{Calls: []Call{
			{Type: Validating, Webhook: "vault-validator.example.com", Round: 0, Index: 1, FailedOpen: true},
		}, ValidatingLatency: 10200 * time.Millisecond},
		{Calls: []Call{
			{Type: Mutating, Configuration: "defaulter", Webhook: "defaults.example.com", Round: 0, Index: 0, FailedOpen: true},
		}, MutatingLatency: 3 * time.Second},
		{Calls: []Call{
			{Type: Mutating, Configuration: "token-audit", Webhook: "tokens.audit.example.com"},
		}},
		{Calls: []Call{
			{Type: Mutating, Configuration: "labeler", Webhook: "labels.example.com", Mutated: true},
		}, MutatingLatency: 800 * time.Millisecond},
		nil, // latency annotations, none about webhooks
		{Calls: []Call{
			{Type: Mutating, Configuration: "good", Webhook: "good.example.com", Index: 4, Mutated: true},
		}, Invalid: 4},
	}
	require.Len(t, events, len(want))
	for i, e := range events {
		got := Parse(e.Annotations)
		require.Equal(t, want[i], got, "line %d (%s)", i+1, e.AuditID)
		require.Equal(t, want[i] != nil, MayHave(lines[i]), "pre-filter of line %d", i+1)
	}
	// The patch annotation's content is never part of what is kept.
	f := Parse(events[5].Annotations)
	out, err := json.Marshal(f)
	require.NoError(t, err)
	require.NotContains(t, string(out), "hunter2")
}

// The real capture: exactly the six widget requests through the e2e-mutator
// webhook carry webhook facts, and the pre-filter flags exactly those lines
// among all 1,340.
func TestParseCapturedEvents(t *testing.T) {
	events, lines := readEvents(t, "../testdata/apiserver-v1.36/request-level-blocking/audit-log-file.jsonl")
	require.Len(t, events, 1340)
	var withFacts []*Facts
	for i, e := range events {
		f := Parse(e.Annotations)
		require.Equal(t, f != nil, MayHave(lines[i]), "pre-filter of line %d", i+1)
		if f != nil {
			require.Equal(t, "ResponseComplete", e.Stage)
			withFacts = append(withFacts, f)
		}
	}
	require.Len(t, withFacts, 6)
	for _, f := range withFacts {
		require.Equal(t, []Call{{Type: Mutating, Configuration: "e2e-mutator", Webhook: "slow-mutator.e2e.example.com"}}, f.Calls)
		require.Zero(t, f.Invalid)
		// The webhook sleeps 1.2 s before answering.
		require.Equal(t, 2, Bucket(f.Latency()))
	}
	require.Equal(t, 1204441340*time.Nanosecond, withFacts[0].MutatingLatency)
	require.Equal(t, 723179*time.Nanosecond, withFacts[0].ValidatingLatency)
}

func TestParseBoundsCalls(t *testing.T) {
	ann := map[string]json.RawMessage{}
	for i := range MaxCallsPerRequest + 10 {
		v, _ := json.Marshal(`{"configuration":"c","webhook":"w.example.com","mutated":false}`)
		ann[MutationPrefix+"round_0_index_"+itoa(i)] = v
	}
	f := Parse(ann)
	require.Len(t, f.Calls, MaxCallsPerRequest)
	require.Equal(t, 10, f.Invalid)
}

func itoa(i int) string { b, _ := json.Marshal(i); return string(b) }

func TestBucket(t *testing.T) {
	for d, want := range map[time.Duration]int{
		0: 0, 500 * time.Millisecond: 0, 500*time.Millisecond + 1: 1, time.Second: 1, 1500 * time.Millisecond: 2,
		2 * time.Second: 2, 5 * time.Second: 3, 9 * time.Second: 4, 10 * time.Second: 4, 10*time.Second + 1: 5, time.Hour: 5,
	} {
		require.Equal(t, want, Bucket(d), d.String())
	}
}

func TestResolver(t *testing.T) {
	r := NewResolver([]WebhookID{
		{Configuration: "vault", Webhook: "vault-validator.example.com"},
		{Configuration: "a", Webhook: "shared.example.com"},
		{Configuration: "b", Webhook: "shared.example.com"},
	})
	f := &Facts{Calls: []Call{
		{Type: Validating, Webhook: "vault-validator.example.com", FailedOpen: true},
		{Type: Validating, Webhook: "shared.example.com", FailedOpen: true},
		{Type: Validating, Webhook: "unknown.example.com", FailedOpen: true},
		{Type: Mutating, Configuration: "own", Webhook: "vault-validator.example.com"},
	}}
	r.Resolve(f)
	require.Equal(t, []string{"vault", "", "", "own"},
		[]string{f.Calls[0].Configuration, f.Calls[1].Configuration, f.Calls[2].Configuration, f.Calls[3].Configuration})
	require.Equal(t, "vault.vault-validator.example.com", WebhookID{"vault", "vault-validator.example.com"}.Name())
	require.Equal(t, "unknown.example.com", WebhookID{Webhook: "unknown.example.com"}.Name())
}
