package auditjson

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/stretchr/testify/require"

	"github.com/kube-sunset/sunset/classify"
)

func keepAll(*classify.Event) bool { return true }

// requestLevelList is the captured Request-level audit log as one
// EventList: events with request objects.
func requestLevelList(t testing.TB) []byte {
	t.Helper()
	f, err := os.Open("../../testdata/apiserver-v1.36/request-level-blocking/audit-log-file.jsonl")
	require.NoError(t, err)
	defer f.Close()
	var items []string
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<24)
	for sc.Scan() {
		items = append(items, sc.Text())
	}
	require.NoError(t, sc.Err())
	return []byte(`{"kind":"EventList","apiVersion":"audit.k8s.io/v1","metadata":{},"items":[` + strings.Join(items, ",") + "]}")
}

// streamBodies are bodies of every shape DecodeBody accepts or rejects.
func streamBodies(t testing.TB) map[string][]byte {
	t.Helper()
	names, err := filepath.Glob(filepath.Join(captured, "*.body"))
	require.NoError(t, err)
	out := map[string][]byte{"request level": requestLevelList(t)}
	for _, n := range names {
		b, err := os.ReadFile(n)
		require.NoError(t, err)
		out[filepath.Base(n)] = b
	}
	item := `{"auditID":"a","stage":"ResponseComplete","verb":"get","objectRef":{"resource":"endpoints","apiVersion":"v1"},"annotations":{"k8s.io/deprecated":"true"}}`
	for name, s := range map[string]string{
		"empty":                  ``,
		"truncated envelope":     `{"kind":"EventList",`,
		"truncated in the items": `{"kind":"EventList","apiVersion":"audit.k8s.io/v1","items":[` + item + `,{"auditID":`,
		"array":                  `[1,2]`,
		"items not a list":       `{"kind":"EventList","apiVersion":"audit.k8s.io/v1","items":"x"}`,
		"items null":             `{"kind":"EventList","apiVersion":"audit.k8s.io/v1","items":null}`,
		"wrong kind":             `{"kind":"PodList","apiVersion":"audit.k8s.io/v1","items":[]}`,
		"kind after items":       `{"apiVersion":"audit.k8s.io/v1","items":[` + item + `],"kind":"EventList"}`,
		"kind in capitals":       `{"kind":"EventList","KIND":"PodList","apiVersion":"audit.k8s.io/v1","items":[` + item + `]}`,
		"items in capitals":      `{"kind":"EventList","apiVersion":"audit.k8s.io/v1","items":[` + item + `],"ITEMS":[]}`,
		"kind changed after":     `{"kind":"EventList","apiVersion":"audit.k8s.io/v1","items":[` + item + `],"kind":"PodList"}`,
		"kind repeated after":    `{"kind":"EventList","apiVersion":"audit.k8s.io/v1","items":[` + item + `],"kind":"EventList"}`,
		"missing apiVersion":     `{"kind":"EventList","items":[]}`,
		"v1beta1":                `{"kind":"EventList","apiVersion":"audit.k8s.io/v1beta1","items":[]}`,
		"single event":           `{"kind":"Event","apiVersion":"audit.k8s.io/v1","auditID":"x","stage":"Panic","requestObject":{"a":1}}`,
		"single event bad stage": `{"kind":"Event","apiVersion":"audit.k8s.io/v1","stage":7}`,
		"bad items":              `{"kind":"EventList","apiVersion":"audit.k8s.io/v1","items":[1,"x",{},` + item + `,{"stage":"Panic","requestReceivedTimestamp":"yesterday"}]}`,
		"no auditIDs":            `{"kind":"EventList","apiVersion":"audit.k8s.io/v1","items":[{"stage":"Panic"}, {"stage": "Panic" }]}`,
		"trailing data":          `{"kind":"EventList","apiVersion":"audit.k8s.io/v1","items":[]} x`,
		"trailing object":        `{"kind":"EventList","apiVersion":"audit.k8s.io/v1","items":[]}{}`,
		"syntax error in items":  `{"kind":"EventList","apiVersion":"audit.k8s.io/v1","items":[` + item + `,{"a" 1}]}`,
		"hostile nesting":        `{"kind":"EventList","apiVersion":"audit.k8s.io/v1","items":[` + strings.Repeat("[", 20000) + strings.Repeat("]", 20000) + `]}`,
		"metadata first":         `{"metadata":{"resourceVersion":"1"},"kind":"EventList","apiVersion":"audit.k8s.io/v1","items":[` + item + `]}`,
	} {
		out[name] = []byte(s)
	}
	return out
}

// sameAsDecodeBody checks that streaming gives what decoding the whole body
// gives: the same events and bad items, or an error of the same reason.
// Only a body with its items twice, or its kind changed to Event after its
// items, differs: streaming refuses it. So do bodies past the stream's
// bounds (an item over maxItemBytes, a body over maxWholeBody that cannot
// be streamed), which TestOneHugeItemIsSkippedWithinBoundedMemory covers.
func sameAsDecodeBody(t *testing.T, body []byte, r io.Reader) {
	t.Helper()
	wantEvents, wantBad, wantErr := DecodeBody(body)
	events, bad, err := DecodeStream(r, keepAll)
	if err != nil && strings.HasPrefix(err.Error(), "body has ") && strings.Contains(err.Error(), " twice") {
		return
	}
	if wantErr != nil {
		var want, got *Error
		require.ErrorAs(t, wantErr, &want)
		require.ErrorAs(t, err, &got, "DecodeBody: %v", wantErr)
		require.Equal(t, want.Reason, got.Reason, "DecodeBody: %v; DecodeStream: %v", wantErr, err)
		return
	}
	require.NoError(t, err)
	require.Equal(t, wantBad, bad)
	require.Len(t, events, len(wantEvents))
	for i := range events {
		require.Equal(t, wantEvents[i], events[i], "event %d", i)
		checkBounds(t, events[i])
	}
}

func TestDecodeStreamMatchesDecodeBody(t *testing.T) {
	t.Parallel()
	for name, body := range streamBodies(t) {
		t.Run(name, func(t *testing.T) {
			sameAsDecodeBody(t, body, bytes.NewReader(body))
			// A byte at a time, as a slow connection delivers it.
			sameAsDecodeBody(t, body, iotest.OneByteReader(bytes.NewReader(body)))
		})
	}
	// The messages of errors before the items are DecodeBody's own.
	_, _, err := DecodeStream(strings.NewReader(`{"kind":"EventList",`), nil)
	require.EqualError(t, err, "body is not valid JSON at byte offset 20: unexpected end of JSON input")
	_, _, err = DecodeStream(strings.NewReader(`{"kind":"EventList","apiVersion":"audit.k8s.io/v1","items":[{"stage":"Panic"},{"a" 1}]}`), nil)
	require.EqualError(t, err, "body is not valid JSON in item 1: invalid character '1' after object key")
	_, _, err = DecodeStream(strings.NewReader(`{"kind":"EventList","apiVersion":"audit.k8s.io/v1","items":[{"stage":"Panic"},{"a"`), nil)
	require.EqualError(t, err, "body is not valid JSON in item 1: unexpected end of JSON input")
}

// Request objects are kept only where the caller needs them.
func TestDecodeStreamKeepsRequestObjectsOnlyWhenAsked(t *testing.T) {
	t.Parallel()
	body := requestLevelList(t)
	all, _, err := DecodeStream(bytes.NewReader(body), keepAll)
	require.NoError(t, err)
	withObject := 0
	for _, ev := range all {
		if len(ev.RequestObject) > 0 {
			withObject++
		}
	}
	// An independent count: the log's lines with a request object.
	require.Equal(t, bytes.Count(body, []byte(`"requestObject":`)), withObject)
	onlyDeletes := func(ev *classify.Event) bool { return ev.Verb == "delete" }
	some, _, err := DecodeStream(bytes.NewReader(body), onlyDeletes)
	require.NoError(t, err)
	for i, ev := range some {
		require.Equal(t, onlyDeletes(&all[i]) && len(all[i].RequestObject) > 0, len(ev.RequestObject) > 0)
		ev.RequestObject = all[i].RequestObject
		require.Equal(t, all[i], ev, "nothing else differs")
	}
	none, _, err := DecodeStream(bytes.NewReader(body), nil)
	require.NoError(t, err)
	for _, ev := range none {
		require.Empty(t, ev.RequestObject)
	}
}

// The reader's own errors, such as a body over the limit, come back as
// they are.
func TestDecodeStreamPassesOnReadErrors(t *testing.T) {
	t.Parallel()
	tooLarge := errors.New("body too large")
	for name, body := range streamBodies(t) {
		if name != "request level" && !strings.HasSuffix(name, ".body") {
			continue
		}
		t.Run(name, func(t *testing.T) {
			_, _, err := DecodeStream(io.MultiReader(bytes.NewReader(body[:len(body)/2]), iotest.ErrReader(tooLarge)), nil)
			require.ErrorIs(t, err, tooLarge)
		})
	}
}

// FuzzDecodeStream holds DecodeStream to DecodeBody on any input.
func FuzzDecodeStream(f *testing.F) {
	for _, b := range streamBodies(f) {
		f.Add(b)
	}
	for _, b := range hostileSeeds() {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		sameAsDecodeBody(t, b, bytes.NewReader(b))
	})
}
