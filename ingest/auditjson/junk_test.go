package auditjson

import (
	"bytes"
	"runtime"
	"testing"
	"testing/iotest"
	"time"

	"github.com/stretchr/testify/require"
)

// junkList is an EventList whose n items are the given JSON values in turn.
func junkList(n int, values ...string) []byte {
	var b bytes.Buffer
	b.WriteString(`{"kind":"EventList","apiVersion":"audit.k8s.io/v1","items":[`)
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(values[i%len(values)])
	}
	b.WriteString(`]}`)
	return b.Bytes()
}

// allocated is how many bytes f allocates on the heap.
func allocated(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// decoders are every way a list is decoded: whole, prefiltered, streamed
// (what the webhook does with a body over maxWholeBody), and streamed with
// the envelope after the items (see envelopeLast), which is read whole and
// decoded by DecodeBody.
func decoders(t *testing.T) map[string]func([]byte) (int, Invalid, error) {
	p := NewPrefilter(testAggregator(t, time.Date(2026, 11, 21, 19, 0, 0, 0, time.UTC)).Interest())
	return map[string]func([]byte) (int, Invalid, error){
		"DecodeBody": func(b []byte) (int, Invalid, error) {
			events, bad, err := DecodeBody(b)
			return len(events), bad, err
		},
		"DecodeBodyFiltered": func(b []byte) (int, Invalid, error) {
			events, bad, _, err := DecodeBodyFiltered(b, p)
			return len(events), bad, err
		},
		"DecodeStream": func(b []byte) (int, Invalid, error) {
			events, bad, err := DecodeStream(bytes.NewReader(b), nil)
			return len(events), bad, err
		},
		"DecodeStreamFiltered": func(b []byte) (int, Invalid, error) {
			events, bad, _, err := DecodeStreamFiltered(bytes.NewReader(b), nil, p)
			return len(events), bad, err
		},
		"DecodeStream envelope last": func(b []byte) (int, Invalid, error) {
			events, bad, err := DecodeStream(bytes.NewReader(b), nil)
			return len(events), bad, err
		},
	}
}

// envelopeLast is the list b with its kind and apiVersion after the items,
// for the decoder that expects it.
func envelopeLast(name string, b []byte) []byte {
	if name != "DecodeStream envelope last" {
		return b
	}
	b = bytes.Replace(b, []byte(`"kind":"EventList","apiVersion":"audit.k8s.io/v1","items":`), []byte(`"items":`), 1)
	return append(b[:len(b)-1], `,"kind":"EventList","apiVersion":"audit.k8s.io/v1"}`...)
}

// requireSamples checks that bad describes exactly its first MaxSamples
// items, each a JSON number where an event belongs, without quoting it.
func requireSamples(t *testing.T, bad Invalid) {
	t.Helper()
	require.Len(t, bad.Samples, MaxSamples)
	for i, s := range bad.Samples {
		require.Equal(t, i, s.Index)
		require.Equal(t, &Error{ReasonMalformedEvent, "event is a JSON number, want an object"}, s.Err)
	}
}

// 8 MiB of `1,` (what 8 KB of gzip inflates to) is 4,194,304 invalid
// items. They used to cost an ItemError, an *Error and its message each,
// about 400 MiB; now they are counted, and only ten are described.
func TestJunkItemsAreCountedNotKept(t *testing.T) {
	const n = 4 << 20
	body := junkList(n, "1")
	require.Len(t, body, 8<<20+len(`{"kind":"EventList","apiVersion":"audit.k8s.io/v1","items":[]}`)-1)
	// Nothing per item; a body with its envelope last is refused once
	// maxWholeBody of it is read. Before, it allocated 6.4 GiB streamed
	// and 3.1 GiB read whole, and kept about 400 MiB of errors.
	requireJunkCounted(t, body, n, func(t *testing.T, bad Invalid) { requireSamples(t, bad) })
}

// requireJunkCounted decodes body, n items that are not objects, with
// every decoder: each counts n, keeps what samples checks, and allocates
// less than 32 MiB.
func requireJunkCounted(t *testing.T, body []byte, n int, samples func(*testing.T, Invalid)) {
	t.Helper()
	for name, decode := range decoders(t) {
		t.Run(name, func(t *testing.T) {
			var events int
			var bad Invalid
			var err error
			body := envelopeLast(name, body)
			alloc := allocated(func() { events, bad, err = decode(body) })
			if name == "DecodeStream envelope last" && len(body) > maxWholeBody {
				// Too large to hold whole, and not a list to stream:
				// refused once maxWholeBody is read.
				require.Equal(t, errBodyNotStreamable, err)
				t.Logf("envelope last, %d bytes: %d bytes allocated", len(body), alloc)
				require.Less(t, alloc, uint64(3*maxWholeBody+raceSlack))
				return
			}
			require.NoError(t, err)
			require.Zero(t, events)
			require.Equal(t, n, bad.Count)
			require.Equal(t, map[Reason]int{ReasonMalformedEvent: n}, bad.ByReason)
			samples(t, bad)
			t.Logf("%d invalid items in %d bytes: %d bytes allocated", n, len(body), alloc)
			require.Less(t, alloc, uint64(32<<20))
		})
	}
}

// A million invalid items of every kind that is not an object: counted
// exactly, and nothing allocated per item.
func TestAMillionInvalidItems(t *testing.T) {
	const n = 1_000_000
	body := junkList(n, "1", `"x"`, "true", "false", "[]", "[1,2]", "-0.5e3")
	requireJunkCounted(t, body, n, func(t *testing.T, bad Invalid) { require.Len(t, bad.Samples, MaxSamples) })
}

// Good events among the junk still count, invalid objects are told apart
// by reason, and the samples are the first ten bad items by index.
func TestJunkAmongEvents(t *testing.T) {
	t.Parallel()
	good := `{"auditID":"a","stage":"ResponseComplete","verb":"get","objectRef":{"resource":"endpoints","apiVersion":"v1"},"annotations":{"k8s.io/deprecated":"true"}}`
	body := junkList(7000, good, "1", "null", `{"stage":7}`, `"s"`, "{}", `{"stage":"Panic","stageTimestamp":"x","annotations":{"k8s.io/deprecated":"true"}}`)
	for name, decode := range decoders(t) {
		t.Run(name, func(t *testing.T) {
			events, bad, err := decode(envelopeLast(name, body))
			require.NoError(t, err)
			require.Equal(t, 1000, events)
			require.Equal(t, 6000, bad.Count)
			require.Equal(t, map[Reason]int{ReasonMalformedEvent: 3000, ReasonMissingStage: 2000, ReasonBadTimestamp: 1000}, bad.ByReason)
			require.Len(t, bad.Samples, MaxSamples)
			for i, s := range bad.Samples {
				// Items 1..6 of every 7 are bad.
				require.Equal(t, i/6*7+i%6+1, s.Index)
			}
			require.Equal(t, ReasonMalformedEvent, bad.Samples[0].Err.Reason)
			require.Equal(t, "event is a JSON number, want an object", bad.Samples[0].Err.Message)
			require.Equal(t, ReasonMissingStage, bad.Samples[1].Err.Reason)
			require.Equal(t, `event field "stage" is a JSON number, want a string`, bad.Samples[2].Err.Message)
			require.Equal(t, "event is a JSON string, want an object", bad.Samples[3].Err.Message)
		})
	}
}

// The item a byte at a time: however the body arrives, junk is counted
// the same.
func TestJunkStreamedAByteAtATime(t *testing.T) {
	t.Parallel()
	body := junkList(5000, "1", "[]", "{}")
	events, bad, err := DecodeStream(iotest.OneByteReader(bytes.NewReader(body)), nil)
	require.NoError(t, err)
	require.Empty(t, events)
	require.Equal(t, 5000, bad.Count)
	require.Equal(t, map[Reason]int{ReasonMalformedEvent: 3334, ReasonMissingStage: 1666}, bad.ByReason)
	_, want, err := DecodeBody(body)
	require.NoError(t, err)
	require.Equal(t, want, bad)
}

// What a non-object item counts as without being decoded is what
// decoding it says.
func TestNonObjectsAreMalformedEvents(t *testing.T) {
	t.Parallel()
	for _, v := range []string{"1", "-2.5e10", `"x"`, `""`, "true", "false", "[]", `[{"stage":"Panic"}]`} {
		_, err := DecodeEvent([]byte(v))
		var e *Error
		require.ErrorAs(t, err, &e, v)
		require.Equal(t, ReasonMalformedEvent, e.Reason, v)
		require.False(t, objectOrNull([]byte(v)), v)
	}
	for _, v := range []string{"null", "{}"} {
		require.True(t, objectOrNull([]byte(v)), v)
	}
}
