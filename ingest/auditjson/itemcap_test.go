package auditjson

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kube-sunset/sunset/classify"
	"github.com/kube-sunset/sunset/countkey"
)

// deprecatedItem is a deprecated request that counts, with a request
// object of objectBytes bytes.
func deprecatedItem(id string, objectBytes int) []byte {
	b := []byte(`{"auditID":"` + id + `","stage":"ResponseComplete","verb":"create","requestURI":"/api/v1/namespaces/a/endpoints",` +
		`"requestReceivedTimestamp":"2026-11-24T10:00:00Z","stageTimestamp":"2026-11-24T10:00:00Z",` +
		`"objectRef":{"resource":"endpoints","apiVersion":"v1"},"annotations":{"k8s.io/deprecated":"true"},"requestObject":{"data":"`)
	b = append(b, bytes.Repeat([]byte("x"), objectBytes)...)
	return append(b, `"}}`...)
}

// bigObjectBytes is the reviewer's request object: 60 MiB in one item.
const bigObjectBytes = 60 << 20

// The peak of a decode is at most what it allocates: TotalAlloc's delta
// bounds the heap it can have held at any instant.
//
// Before the item bound a body of one 60 MiB item allocated 182 MiB
// streamed, and 212 MiB with its items before its kind (read whole, then
// decoded whole); now the item is skipped as it streams by, and the other
// body is refused once maxWholeBody of it is read.
func TestOneHugeItemIsSkippedWithinBoundedMemory(t *testing.T) {
	item := deprecatedItem("huge", bigObjectBytes)
	bodies := map[string][]byte{
		"kind first": list(item),
		"items first": append(append([]byte(`{"items":[`), item...),
			`],"kind":"EventList","apiVersion":"audit.k8s.io/v1"}`...),
	}
	// Two item bounds for the splitter's buffer and the one it grew
	// from, the body's first maxWholeBody, and 1 MiB for the rest.
	const bound = 2*maxItemBytes + 2*maxWholeBody + 1<<20 + raceSlack
	for name, body := range bodies {
		t.Run(name, func(t *testing.T) {
			var events []classify.Event
			var bad Invalid
			var err error
			n := allocated(func() {
				events, bad, _, err = DecodeStreamFiltered(bytes.NewReader(body), keepAll, NewPrefilter(classify.Interest{AllCompleted: true}))
			})
			t.Logf("%s: %.1f MiB allocated decoding %.1f MiB", name, float64(n)/(1<<20), float64(len(body))/(1<<20))
			if name == "kind first" {
				require.NoError(t, err)
				require.Empty(t, events)
				require.Equal(t, Invalid{Count: 1, ByReason: map[Reason]int{ReasonTooLarge: 1},
					Samples: []ItemError{{Index: 0, Err: errItemTooLarge}}}, bad)
			} else {
				require.Equal(t, errBodyNotStreamable, err)
			}
			require.LessOrEqual(t, n, uint64(bound))
		})
	}
}

// A batch of 9: the 5th item is over the bound, the 8 others count. The
// big one is refused alone, and told by its index and reason.
func TestAnItemOverTheBoundIsRefusedAlone(t *testing.T) {
	t.Parallel()
	items := make([]string, 9)
	for i := range items {
		size := 100
		if i == 4 {
			size = maxItemBytes
		}
		items[i] = string(deprecatedItem(fmt.Sprintf("id-%d", i), size))
	}
	body := list([]byte(strings.Join(items, ",")))
	events, bad, _, err := DecodeStreamFiltered(bytes.NewReader(body), keepAll, NewPrefilter(classify.Interest{AllCompleted: true}))
	require.NoError(t, err)
	var ids []string
	for _, ev := range events {
		ids = append(ids, ev.ID)
		require.Len(t, ev.RequestObject, len(`{"data":""}`)+100)
	}
	require.Equal(t, []string{"id-0", "id-1", "id-2", "id-3", "id-5", "id-6", "id-7", "id-8"}, ids)
	require.Equal(t, Invalid{Count: 1, ByReason: map[Reason]int{ReasonTooLarge: 1},
		Samples: []ItemError{{Index: 4, Err: errItemTooLarge}}}, bad)
}

// A body that draws more than the budget has left stops with
// ErrOverBudget; one that needs more than the whole budget, with
// ErrBodyOverBudget. Closing an account gives back all it held.
func TestBudgetIsSharedByTheBodies(t *testing.T) {
	t.Parallel()
	body := list([]byte(strings.Repeat(string(deprecatedItem("a", 2<<20))+",", 3) + string(deprecatedItem("b", 2<<20))))
	b := NewBudget(64 << 20)
	first := b.Open()
	events, _, _, err := DecodeStreamWithin(first, bytes.NewReader(body), keepAll, nil)
	require.NoError(t, err)
	require.Len(t, events, 4)
	held := first.Held()
	t.Logf("a body of %d bytes holds %d bytes", len(body), held)
	// Four request objects of 2 MiB kept, and the splitter's buffer.
	require.Greater(t, held, int64(4*(2<<20)))
	require.Less(t, held, int64(4*(2<<20)+2*(4<<20)))
	require.Equal(t, held, b.InUse())

	// What is left is less than the body needs.
	squeezed := NewBudget(held + held/2)
	hold := squeezed.Open()
	_, _, _, err = DecodeStreamWithin(hold, bytes.NewReader(body), keepAll, nil)
	require.NoError(t, err)
	second := squeezed.Open()
	_, _, _, err = DecodeStreamWithin(second, bytes.NewReader(body), keepAll, nil)
	require.ErrorIs(t, err, ErrOverBudget)
	second.Close()
	hold.Close()
	require.Equal(t, int64(0), squeezed.InUse())

	_, _, _, err = DecodeStreamWithin(NewBudget(held/2).Open(), bytes.NewReader(body), keepAll, nil)
	require.ErrorIs(t, err, ErrBodyOverBudget)

	first.Close()
	require.Equal(t, int64(0), b.InUse())
}

// Each of auditID, requestURI and the timestamps may be as long as the
// body; none is copied whole, on any path.
func TestLongIdentifiersAreBoundedOnEveryPath(t *testing.T) {
	const long = 1 << 20
	id := strings.Repeat("i", long)
	escapedID := strings.Repeat(`\u0069`, long/6)
	uri := "/api/v1/namespaces/a/endpoints?dryRun=All&labelSelector=" + strings.Repeat("a", long)
	base := `"stage":"ResponseComplete","verb":"create","objectRef":{"resource":"endpoints","apiVersion":"v1"},"annotations":{"k8s.io/deprecated":"true"}`
	for _, c := range []struct {
		name, raw string
		want      func(t *testing.T, ev classify.Event, err error)
	}{
		{"auditID", `{"auditID":"` + id + `",` + base + `}`, func(t *testing.T, ev classify.Event, err error) {
			require.NoError(t, err)
			require.Equal(t, countkey.MarkID(id), ev.ID)
		}},
		{"escaped auditID", `{"auditID":"` + escapedID + `",` + base + `}`, func(t *testing.T, ev classify.Event, err error) {
			require.NoError(t, err)
			require.Equal(t, countkey.MarkID(strings.Repeat("i", long/6)), ev.ID)
		}},
		{"requestURI", `{"auditID":"u","requestURI":"` + uri + `",` + base + `}`, func(t *testing.T, ev classify.Event, err error) {
			require.NoError(t, err)
			require.True(t, ev.DryRun, "dryRun=All comes before the bound")
			require.Equal(t, classify.DroppedOverBound, ev.Dropped)
		}},
		{"requestReceivedTimestamp", `{"auditID":"t","requestReceivedTimestamp":"2026-11-24T10:00:00.` + strings.Repeat("0", long) + `Z",` + base + `}`,
			func(t *testing.T, ev classify.Event, err error) {
				require.Equal(t, &Error{ReasonBadTimestamp, "requestReceivedTimestamp is not an RFC 3339 time"}, err)
			}},
		{"stageTimestamp", `{"auditID":"t","stageTimestamp":"` + strings.Repeat("2", long) + `",` + base + `}`,
			func(t *testing.T, ev classify.Event, err error) {
				require.Equal(t, &Error{ReasonBadTimestamp, "stageTimestamp is not an RFC 3339 time"}, err)
			}},
	} {
		t.Run(c.name, func(t *testing.T) {
			raw := []byte(c.raw)
			for _, path := range []struct {
				name   string
				decode func(*testing.T, []byte) (classify.Event, error)
			}{
				{"scanner", func(t *testing.T, b []byte) (classify.Event, error) {
					var w wireEvent
					require.True(t, decodeWire(b, &w))
					return convert(&w, b)
				}},
				{"encoding/json", func(_ *testing.T, b []byte) (classify.Event, error) { return decodeEvent[wireEvent](b) }},
				{"admission", func(_ *testing.T, b []byte) (classify.Event, error) { return decodeEvent[wireEventWithAdmission](b) }},
			} {
				t.Run(path.name, func(t *testing.T) {
					var ev classify.Event
					var err error
					n := allocated(func() { ev, err = path.decode(t, raw) })
					c.want(t, ev, err)
					if err == nil {
						checkBounds(t, ev)
					}
					// The escaped ID is decoded once, to be hashed;
					// nothing else is copied.
					bound := uint64(64 << 10)
					if c.name == "escaped auditID" {
						bound += long
					}
					require.Less(t, n, bound, "%d bytes allocated for %d bytes", n, len(raw))
				})
			}
		})
	}
}

// FuzzSkipper holds the streaming skip of an item over the bound to the
// scanner: on any valid JSON value, fed whole or a byte at a time, it ends
// the item where skipValue does, and leaves the list's bracket after it.
func FuzzSkipper(f *testing.F) {
	for _, b := range streamBodies(f) {
		f.Add(b)
	}
	for _, b := range hostileSeeds() {
		f.Add(b)
	}
	f.Add([]byte(`-12.5e3`))
	f.Add([]byte(`"a\"\\\u00e9"`))
	f.Fuzz(func(t *testing.T, b []byte) {
		start := skipSpace(b, 0)
		end := skipValue(b, start, 2)
		if end < 0 || skipSpace(b, end) != len(b) {
			return
		}
		in := append(append([]byte{}, b[:end]...), ']')
		whole := skipper{}
		n, fin, done, bad := whole.feed(in)
		require.Equal(t, []any{end, true, false, false}, []any{n, fin, done, bad})
		byByte := skipper{}
		for i := range in {
			n, fin, done, bad = byByte.feed(in[i : i+1])
			require.False(t, bad)
			require.False(t, done)
			if fin {
				require.Equal(t, end, i+n, "byte at a time")
				return
			}
		}
		t.Fatal("the item never ended")
	})
}
