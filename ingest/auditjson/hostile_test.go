package auditjson

import (
	"bytes"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/kube-sunset/sunset/aggregate"
	"github.com/kube-sunset/sunset/classify"
	"github.com/kube-sunset/sunset/countkey"
	"github.com/kube-sunset/sunset/internal/testutil/ingesttest"
)

// heapBudget is what decoding one hostile event may allocate beyond the
// input itself.
const heapBudget = 64 << 20

// bombEvent is an audit event whose field (a path such as
// `"sourceIPs":`) holds a list that starts with head, then n copies of
// entry, then tail. It is built in one allocation of its final size.
func bombEvent(field, head, entry, tail string, n int) []byte {
	pre := `{"auditID":"bomb","stage":"ResponseComplete","verb":"get","requestReceivedTimestamp":"2026-11-24T10:00:00Z",` +
		`"objectRef":{"resource":"endpoints","apiVersion":"v1"},`
	if !strings.Contains(field, `"annotations"`) {
		pre += `"annotations":{"k8s.io/deprecated":"true"},`
	}
	b := make([]byte, 0, len(pre)+len(field)+len(head)+n*len(entry)+len(tail)+8)
	b = append(b, pre...)
	b = append(b, field...)
	b = append(b, head...)
	for range n {
		b = append(b, entry...)
	}
	b = append(b, tail...)
	return append(b, '}')
}

// eventDecoders are every way an event reaches the aggregator: the scanner's
// path and encoding/json's, for a single event (a log line, a Kafka
// message, an EKS or GKE entry), a list decoded whole (a Kafka EventList,
// a small webhook body), a list streamed (a large webhook body), and the
// admission path of a batch with webhook annotations. slack is what each
// may allocate beyond heapBudget for holding the input as it reads it.
var eventDecoders = []struct {
	name string
	// input is what the decoder reads for the event raw.
	input  func(raw []byte) []byte
	decode func(t testing.TB, in []byte) classify.Event
	slack  func(raw []byte) uint64
}{
	{"DecodeEvent", same, func(t testing.TB, raw []byte) classify.Event {
		var w wireEvent
		require.True(t, decodeWire(raw, &w), "the scanner's path")
		ev, err := DecodeEvent(raw)
		require.NoError(t, err)
		return ev
	}, none},
	{"encoding/json", same, func(t testing.TB, raw []byte) classify.Event {
		ev, err := decodeEvent[wireEvent](raw)
		require.NoError(t, err)
		return ev
	}, none},
	{"admission path", same, func(t testing.TB, raw []byte) classify.Event {
		ev, err := decodeEvent[wireEventWithAdmission](raw)
		require.NoError(t, err)
		return ev
	}, none},
	{"DecodeBody", list, func(t testing.TB, body []byte) classify.Event {
		events, bad, err := DecodeBody(body)
		require.NoError(t, err)
		require.Zero(t, bad.Count)
		require.Len(t, events, 1)
		return events[0]
	}, none},
	{"DecodeStreamFiltered", list, func(t testing.TB, body []byte) classify.Event {
		events, bad, _, err := DecodeStreamFiltered(bytes.NewReader(body), nil, NewPrefilter(classify.Interest{AllCompleted: true}))
		require.NoError(t, err)
		if len(body) > maxItemBytes {
			// Streamed, an event this large is skipped unread and
			// refused alone; what the others keep of it is checked on
			// the whole body.
			require.Equal(t, Invalid{Count: 1, ByReason: map[Reason]int{ReasonTooLarge: 1},
				Samples: []ItemError{{Index: 0, Err: errItemTooLarge}}}, bad)
			require.Empty(t, events)
			events, _, err = DecodeBody(body)
			require.NoError(t, err)
			return events[0]
		}
		require.Zero(t, bad.Count)
		require.Len(t, events, 1)
		return events[0]
	}, streamed},
}

func none([]byte) uint64 { return 0 }

func same(raw []byte) []byte { return raw }

// streamed is what a streamed body allocates to hold its input: a large
// body's item is read into a buffer that doubles as it fills (up to twice
// the item, and as much again on the way), after the first maxWholeBody
// bytes were read to see if the body is small.
func streamed(raw []byte) uint64 { return 4*uint64(len(raw)) + 2*maxWholeBody }

// list is raw as the one item of an EventList.
func list(raw []byte) []byte {
	return append(append([]byte(`{"kind":"EventList","apiVersion":"audit.k8s.io/v1","items":[`), raw...), "]}"...)
}

// One event whose sourceIPs hold 18 million empty strings between two
// addresses: every decoder keeps the first and the last, allocates a
// bounded amount beyond the input, and notes what it left out.
func TestArrayBombInSourceIPs(t *testing.T) {
	raw := bombEvent(`"sourceIPs":`, `["10.0.0.1",`, `"",`, `"192.0.2.7"]`, bombEntries)
	require.Greater(t, len(raw), bombMinBytes)
	for _, d := range eventDecoders {
		t.Run(d.name, func(t *testing.T) {
			in := d.input(raw)
			var ev classify.Event
			n := allocated(func() { ev = d.decode(t, in) })
			t.Logf("%s: %d MiB allocated decoding %d MiB", d.name, n>>20, len(raw)>>20)
			require.Less(t, n, heapBudget+d.slack(raw))
			require.Equal(t, []string{"10.0.0.1", "192.0.2.7"}, ev.SourceIPs)
			require.Equal(t, classify.DroppedSourceIP, ev.Dropped&classify.DroppedSourceIP)
			require.True(t, ev.Deprecated)
		})
	}
}

// The same for every other list of an event: the groups (never decoded),
// user.extra's pod-bound values (the first is kept), a DeleteOptions'
// dryRun, and annotations, plain and with webhook annotations among them.
func TestArrayBombsInOtherLists(t *testing.T) {
	if testing.Short() {
		t.Skip("decodes 20 MiB events")
	}
	bombs := func(n int) map[string][]byte {
		return map[string][]byte{
			"groups":   bombEvent(`"user":{"username":"u","groups":`, `[`, `"",`, `"g"]}`, n),
			"pod-name": bombEvent(`"user":{"username":"u","extra":{"authentication.kubernetes.io/pod-name":`, `["pod-1",`, `"",`, `"x"]}}`, n),
			"node-name in impersonatedUser": bombEvent(`"impersonatedUser":{"username":"u","extra":{"authentication.kubernetes.io/node-name":`,
				`["node-1",`, `"",`, `"x"]}}`, n),
			"pod-uid": bombEvent(`"user":{"username":"u","extra":{"authentication.kubernetes.io/pod-uid":`, `["uid",`, `"",`, `"x"]}}`, n),
			"dryRun": bytes.Replace(bombEvent(`"requestObject":{"kind":"DeleteOptions","dryRun":`, `[`, `"",`, `"All"]}`, n),
				[]byte(`"verb":"get"`), []byte(`"verb":"delete"`), 1),
			"annotations": bombEvent(`"stageTimestamp":"2026-11-24T10:00:00Z","annotations":`, `{`, `"a":"",`, `"k8s.io/removed-release":"1.37"}`, n/2),
			"webhook annotations": bombEvent(`"stageTimestamp":"2026-11-24T10:00:00Z","annotations":`,
				`{"mutation.webhook.admission.k8s.io/round_0_index_0":"{\"configuration\":\"c\",\"webhook\":\"w\",\"mutated\":true}",`,
				`"failed-open.validating.webhook.admission.k8s.io/round_0_index_0":"w",`, `"k8s.io/deprecated":"true"}`, n/16),
		}
	}
	// A stream reads bombs over maxItemBytes, as it would one of any
	// size: it skips them unread. The other decoders walk the whole
	// event, of bombWholeEntries, fewer under the race detector.
	streamed := bombs(bombListEntries)
	whole := streamed
	if bombWholeEntries != bombListEntries {
		whole = bombs(bombWholeEntries)
	}
	for name, big := range streamed {
		require.Greater(t, len(big), maxItemBytes, name)
		for _, d := range eventDecoders {
			raw := whole[name]
			if d.name == "DecodeStreamFiltered" {
				raw = big
			}
			t.Run(name+"/"+d.name, func(t *testing.T) {
				in := d.input(raw)
				var ev classify.Event
				allocs := allocated(func() { ev = d.decode(t, in) })
				t.Logf("%d MiB allocated decoding %d MiB", allocs>>20, len(raw)>>20)
				require.Less(t, allocs, heapBudget+d.slack(raw), "%d MiB allocated", allocs>>20)
				switch name {
				case "pod-name":
					require.Equal(t, "pod-1", ev.PodName)
				case "node-name in impersonatedUser":
					require.Equal(t, "node-1", ev.PodNode)
				case "dryRun":
					require.True(t, ev.DryRun)
				case "annotations":
					require.Equal(t, "1.37", ev.RemovedRelease)
				case "webhook annotations":
					require.True(t, ev.Deprecated)
					if d.name == "admission path" || d.name == "DecodeBody" || d.name == "DecodeStreamFiltered" || d.name == "DecodeEvent" {
						require.NotNil(t, ev.Admission)
						require.Len(t, ev.Admission.Calls, 2)
					}
				}
			})
		}
	}
}

// A removed release that is not a release, or longer than a release can
// be, is dropped and counted; the event still counts, with the catalog's
// removed release.
func TestRemovedReleaseIsValidated(t *testing.T) {
	reg := prometheus.NewRegistry()
	agg := aggregate.New(aggregate.Options{Registerer: reg})
	for _, c := range []struct {
		name, value, want string
		dropped           bool
	}{
		{"release", `"1.37"`, "1.37", false},
		{"patch release", `"v1.37.2"`, "1.37", false},
		{"escaped", `"1.3\u0037"`, "1.37", false},
		{"empty", `""`, "", false},
		{"null", `null`, "", false},
		{"not a release", `"banana"`, "", true},
		{"no minor", `"1."`, "", true},
		{"9 MiB", `"` + strings.Repeat("1", 9<<20) + `.37"`, "", true},
		{"over the bound", `"1.37` + strings.Repeat(" ", countkey.MaxReleaseBytes) + `"`, "", true},
	} {
		t.Run(c.name, func(t *testing.T) {
			raw := []byte(`{"auditID":"r","stage":"ResponseComplete","annotations":{"k8s.io/deprecated":"true","k8s.io/removed-release":` + c.value + `}}`)
			for _, d := range eventDecoders {
				in := d.input(raw)
				var ev classify.Event
				allocs := allocated(func() { ev = d.decode(t, in) })
				require.Less(t, allocs, uint64(1<<20)+d.slack(raw), "%s: %d KiB allocated", d.name, allocs>>10)
				require.Equal(t, c.want, ev.RemovedRelease, d.name)
				require.Equal(t, c.dropped, ev.Dropped&classify.DroppedRemovedRelease != 0, d.name)
				require.True(t, ev.Deprecated)
			}
			before := decodeErrors(t, reg, "bad_removed_release")
			ev, err := DecodeEvent(raw)
			require.NoError(t, err)
			_, err = agg.Plan(classify.Origin{Source: "webhook", Cluster: "c", Node: "n"}, []classify.Event{ev})
			require.NoError(t, err)
			after := decodeErrors(t, reg, "bad_removed_release")
			if c.dropped {
				require.Equal(t, before+1, after, "counted")
			} else {
				require.Equal(t, before, after)
			}
		})
	}
}

// decodeErrors is sunset_ingest_decode_errors_total{source="webhook"} of
// reason in reg.
func decodeErrors(t *testing.T, reg *prometheus.Registry, reason string) float64 {
	t.Helper()
	families, err := reg.Gather()
	require.NoError(t, err)
	for _, f := range families {
		if f.GetName() != "sunset_ingest_decode_errors_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["source"] == "webhook" && labels["reason"] == reason {
				return m.GetCounter().GetValue()
			}
		}
	}
	return 0
}

// Only addresses are kept of sourceIPs: the first forwarded ones, up to
// the aggregator's bound, and the last.
func TestSourceIPsKeepOnlyAddresses(t *testing.T) {
	for _, c := range []struct {
		name, list string
		want       []string
		dropped    classify.Dropped
	}{
		{"not addresses", `["10.0.0.1","bad","","::1","1.2.3.4:80","300.1.1.1",null,"fe80::1%eth0","10.0.0.2"]`,
			[]string{"10.0.0.1", "::1", "fe80::1%eth0", "10.0.0.2"}, classify.DroppedSourceIP},
		{"too long, and escaped", `["10.0.0.1","` + strings.Repeat("1", 100) + `","\u0031\u0030.0.0.2"]`, []string{"10.0.0.1", "10.0.0.2"}, classify.DroppedSourceIP},
		{"over the bound", `["10.0.0.1","10.0.0.2","10.0.0.3","10.0.0.4","10.0.0.5","10.0.0.6","10.0.0.7","10.0.0.8","10.0.0.9","10.0.0.10","10.0.0.11","192.0.2.7"]`,
			[]string{"10.0.0.1", "10.0.0.2", "10.0.0.3", "10.0.0.4", "10.0.0.5", "10.0.0.6", "10.0.0.7", "10.0.0.8", "10.0.0.9", "192.0.2.7"},
			classify.DroppedOverBound},
		{"one", `["192.0.2.7"]`, []string{"192.0.2.7"}, 0},
		{"empty", `[]`, []string{}, 0},
		{"null", `null`, nil, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			raw := []byte(`{"auditID":"s","stage":"ResponseComplete","sourceIPs":` + c.list + `}`)
			for _, d := range eventDecoders {
				ev := d.decode(t, d.input(raw))
				require.Equal(t, c.want, ev.SourceIPs, "%s %s", c.list, d.name)
				require.Equal(t, c.dropped, ev.Dropped, "%s %s", c.list, d.name)
			}
		})
	}
	// Millions of entries that are not addresses cost a scan, not a
	// parse each.
	raw := bombEvent(`"sourceIPs":`, `[`, `"x",`, `"192.0.2.7"]`, 1<<20)
	for _, d := range eventDecoders {
		in := d.input(raw)
		var ev classify.Event
		require.Less(t, allocated(func() { ev = d.decode(t, in) }), uint64(1<<20)+d.slack(raw), d.name)
		require.Equal(t, []string{"192.0.2.7"}, ev.SourceIPs)
	}
}

// Strings an event keeps are cut at their bound as they are read, at a
// character boundary, on either path; the parts of an API name keep one
// character more, so that the aggregator still refuses them.
func TestStringsAreBoundedAsRead(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("é", 4<<10)
	raw := []byte(`{"auditID":"s","stage":"ResponseComplete","verb":"` + long + `","userAgent":"` + long + `",` +
		`"user":{"username":"` + long + `","extra":{"authentication.kubernetes.io/pod-name":["` + long + `"]}},` +
		`"impersonatedUser":{"username":"\u00e9` + long + `","extra":{"authentication.kubernetes.io/node-name":["` + long + `"]}},` +
		`"objectRef":{"resource":"` + long + `","apiVersion":"v1","apiGroup":"` + long + `","subresource":"` + long + `"}}`)
	for _, d := range eventDecoders {
		ev := d.decode(t, d.input(raw))
		checkBounds(t, ev)
		require.Len(t, ev.Username, countkey.MaxUsernameBytes, d.name)
		require.Len(t, ev.ImpersonatedBy, countkey.MaxUsernameBytes, d.name)
		require.Len(t, ev.UserAgent, countkey.MaxUserAgentBytes, d.name)
		require.Len(t, ev.Verb, countkey.MaxVerbBytes-1, d.name)
		require.Greater(t, len(ev.ObjectRef.Resource), countkey.MaxResourceBytes, d.name)
		require.Greater(t, len(ev.ObjectRef.Group), countkey.MaxGroupBytes, d.name)
		require.Equal(t, classify.DroppedOverBound, ev.Dropped, d.name)
	}
}

// checkBounds fails t when ev holds anything over the decoder's bounds.
func checkBounds(t testing.TB, ev classify.Event) { t.Helper(); ingesttest.CheckBounds(t, ev) }

// hostileSeeds are fuzz seeds of hostile lengths: long lists, long
// values, many annotations.
func hostileSeeds() [][]byte {
	events := ingesttest.HostileEvents()
	out := make([][]byte, 0, len(events)+1)
	for _, e := range events {
		out = append(out, []byte(e))
	}
	return append(out, list([]byte(strings.Join(events, ","))))
}
