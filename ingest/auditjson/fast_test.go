package auditjson

import (
	"bufio"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kube-sunset/sunset/internal/testutil/auditgen"
)

// capturedEvents returns the items of the captured bodies and the lines of the
// captured logs, each one event as kube-apiserver wrote it.
func capturedEvents(t testing.TB) [][]byte {
	var events [][]byte
	bodies, err := filepath.Glob(filepath.Join(captured, "*.body"))
	require.NoError(t, err)
	for _, n := range bodies {
		body, err := os.ReadFile(n)
		require.NoError(t, err)
		var list struct{ Items []json.RawMessage }
		require.NoError(t, json.Unmarshal(body, &list))
		for _, item := range list.Items {
			events = append(events, item)
		}
	}
	logs, err := filepath.Glob("../../testdata/apiserver-v1.36/*/*.jsonl")
	require.NoError(t, err)
	for _, n := range logs {
		f, err := os.Open(n)
		require.NoError(t, err)
		sc := bufio.NewScanner(f)
		sc.Buffer(nil, 1<<22)
		for sc.Scan() {
			events = append(events, append([]byte(nil), sc.Bytes()...))
		}
		require.NoError(t, sc.Err())
		require.NoError(t, f.Close())
	}
	return events
}

// Every event the captures hold takes the fast decode, and it gives
// encoding/json's result.
func TestDecodeWireTakesEveryCapturedEvent(t *testing.T) {
	t.Parallel()
	events := capturedEvents(t)
	require.Len(t, events, 1359+1340+1393, "the batches' items and both logs' lines")
	for i, raw := range events {
		var fast, slow wireEvent
		require.True(t, decodeWire(raw, &fast), "event %d", i)
		require.NoError(t, json.Unmarshal(raw, &slow))
		require.Equal(t, slow, fast, "event %d", i)
	}
}

// What the fast decode declines, encoding/json decodes, and DecodeEvent's
// answer is the same either way.
func TestDecodeWireDeclinesWhatItCannotBeSureOf(t *testing.T) {
	t.Parallel()
	for _, raw := range []string{
		`{"stage":"ResponseComplete","stage":"RequestReceived"}`,     // repeated field
		`{"st\u0061ge":"ResponseComplete"}`,                          // escaped key
		`{"\u212aind":"Event","stage":"ResponseComplete"}`,           // Kelvin sign folds to k
		`{"stage":"ResponseComplete","responseStatus":{"code":4e2}}`, // a number an int32 refuses
		`{"stage":"ResponseComplete","annotations":"x"}`,
		`{"stage":"ResponseComplete","sourceIPs":["10.0.0.1",1]}`,
		`{"stage":"ResponseComplete"`,
	} {
		var w wireEvent
		require.False(t, decodeWire([]byte(raw), &w), raw)
		fast, fastErr := DecodeEvent([]byte(raw))
		slow, slowErr := decodeEvent[wireEvent]([]byte(raw))
		require.Equal(t, slowErr, fastErr, raw)
		require.Equal(t, slow, fast, raw)
	}
	// What it takes, in every case and with nulls, as encoding/json reads it.
	for _, raw := range []string{
		`{"STAGE":"ResponseComplete","Verb":"get","objectref":{"Resource":"endpoints","apiversion":"v1"},"ResponseStatus":{"code":-404}}`,
		`{"stage":"ResponseComplete","user":null,"impersonatedUser":null,"objectRef":null,"responseStatus":null,"annotations":null,"sourceIPs":null,"requestObject":null}`,
		`{"stage":"ResponseComplete","sourceIPs":[],"user":{"extra":{"authentication.kubernetes.io/pod-name":[],"authentication.kubernetes.io/node-name":["n1","n2"]}}}`,
		`{"stage":"ResponseComplete","annotations":{"K8s.io/deprecated":"true","k8s.io/removed-release":null},"userAgent":"caf\u00e9"}`,
		"{\"stage\":\"ResponseComplete\",\"userAgent\":\"caf\xc3\xa9\"}",
		"{\"stage\":\"ResponseComplete\",\"userAgent\":\"\xff\",\"auditID\":\"a\\u0062\\ud800\"}",
		// Annotations are read by one walk on either path: repeated and
		// escaped keys too.
		`{"stage":"ResponseComplete","annotations":{"k8s.io/deprecated":"true","k8s.io/deprecated":null}}`,
		`{"stage":"ResponseComplete","annotations":{"k8s.io\/deprecated":"tru\u0065","k8s.io/removed-release":"v1.37.2"}}`,
		`{"stage":"ResponseComplete","sourceIPs":[null,"10.0.0.1","x","::1"]}`,
	} {
		var fast, slow wireEvent
		require.True(t, decodeWire([]byte(raw), &fast), raw)
		require.NoError(t, json.Unmarshal([]byte(raw), &slow), raw)
		require.Equal(t, slow, fast, raw)
	}
}

// FuzzDecodeWire holds the fast decode to encoding/json: whatever it
// takes, encoding/json decodes without error to the same value.
func FuzzDecodeWire(f *testing.F) {
	for _, raw := range capturedEvents(f)[:40] {
		f.Add(raw)
	}
	gen := auditgen.Options{Prefix: "w", DeprecatedEvery: 2, At: time.Date(2026, 11, 24, 10, 0, 0, 0, time.UTC)}
	f.Add(gen.Append(nil, 0))
	f.Add(gen.Append(nil, 1))
	f.Add([]byte(`{"stage":"x","user":{"username":"u","extra":{"authentication.kubernetes.io/pod-uid":["1"]}},"impersonatedUser":{"username":"v"},"requestObject":{"a":[1]}}`))
	for _, b := range hostileSeeds() {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		var fast wireEvent
		if !decodeWire(raw, &fast) {
			return
		}
		var slow wireEvent
		require.NoError(t, json.Unmarshal(raw, &slow), "%q", raw)
		require.Equal(t, slow, fast, "%q", raw)
		if ev, err := convert(&fast, raw); err == nil {
			checkBounds(t, ev)
		}
	})
}
