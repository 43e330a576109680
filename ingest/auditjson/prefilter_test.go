package auditjson

import (
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	auditv1 "k8s.io/apiserver/pkg/apis/audit/v1"

	"github.com/kube-sunset/sunset/aggregate"
	"github.com/kube-sunset/sunset/catalog"
	"github.com/kube-sunset/sunset/classify"
	"github.com/kube-sunset/sunset/countkey"
	"github.com/kube-sunset/sunset/fieldrule"
	"github.com/kube-sunset/sunset/internal/testutil/auditgen"
)

// The scanner must accept exactly what encoding/json accepts.
func TestScannerAgreesWithEncodingJSON(t *testing.T) {
	t.Parallel()
	deep := strings.Repeat("[", maxScanDepth) + strings.Repeat("]", maxScanDepth)
	tooDeep := strings.Repeat("[", maxScanDepth+1) + strings.Repeat("]", maxScanDepth+1)
	// Objects, and containers mixed, past the 64 that skipValue's loop
	// holds before it calls itself, with what follows them checked.
	deepObjects := strings.Repeat(`{"a":`, maxScanDepth) + "1" + strings.Repeat("}", maxScanDepth)
	tooDeepObjects := strings.Repeat(`{"a":`, maxScanDepth+1) + "1" + strings.Repeat("}", maxScanDepth+1)
	mixed := strings.Repeat(`[{"a":`, 40) + "1" + strings.Repeat("}]", 40)
	mixedUnclosed := strings.Repeat(`[{"a":`, 40) + "1" + strings.Repeat("}]", 39) + "}"
	mixedSibling := `[` + strings.Repeat("[", 70) + strings.Repeat("]", 70) + `,{"b":[2,{}]}]`
	mixedBadSibling := `[` + strings.Repeat("[", 70) + strings.Repeat("]", 70) + `,{"b" 2}]`
	for _, in := range []string{
		`0`, `-0`, `-`, `01`, `1.`, `1.5`, `.5`, `1e5`, `1E+5`, `1e-5`, `1e`, `1e+`, `-1.5e-3`, `+1`, `1x`,
		`true`, `tru`, `truex`, `false`, `null`, `nul`, `NULL`,
		`""`, `"a"`, `"\""`, `"\\"`, `"\/"`, `"\b\f\n\r\t"`, `"\u00e9"`, `"\u00E9"`, `"\u00g9"`, `"\u00e"`, `"\x"`, `"\`, `"`,
		"\"tab\there\"", "\"nl\nhere\"", "\"\x7f\"", "\"\xff\xfe invalid UTF-8\"", "\"\xe2\x82\"", `"é"`,
		`"12345678901234567890\"1234567890"`, `"1234567\u12345678"`, "\"12345678\x01abcdefgh\"",
		`{}`, `{ }`, `{"a":1}`, `{"a":1,}`, `{"a" 1}`, `{a:1}`, `{"a":1 "b":2}`, `{"a":{"b":[1,2,{"c":null}]}}`,
		`[]`, `[1,]`, `[,1]`, `[1 2]`, `[1,2]`, ` [ 1 , 2 ] `, "\t\r\n[]\n", `[1]]`, `{}}`, `{} {}`, `[1] x`,
		`{"a":"b"`, `{"a":`, `[`, ``, ` `, "\u00a0[]", "[]\x00",
		deep, tooDeep, deepObjects, tooDeepObjects, mixed, mixedUnclosed, mixedSibling, mixedBadSibling,
	} {
		b := []byte(in)
		i := skipSpace(b, 0)
		end := skipValue(b, i, 0)
		ok := end >= 0 && skipSpace(b, end) == len(b)
		require.Equal(t, json.Valid(b), ok, "%q", in[:min(len(in), 40)])
	}
}

func FuzzScanner(f *testing.F) {
	for _, s := range []string{`{"a":[1,2.5e3,"x\u0041"]}`, `"\x"`, `[1,]`, "\"\xff\"", `-0.0e-0`} {
		f.Add([]byte(s))
	}
	body, err := os.ReadFile(filepath.Join(captured, "00002.body"))
	require.NoError(f, err)
	f.Add(body)
	f.Fuzz(func(t *testing.T, b []byte) {
		end := skipValue(b, skipSpace(b, 0), 0)
		ok := end >= 0 && skipSpace(b, end) == len(b)
		if ok != json.Valid(b) {
			t.Fatalf("scanner says %v, encoding/json says %v", ok, json.Valid(b))
		}
	})
}

// referenceRelease is the removed release Sunset keeps of the annotation
// s: a release of at most countkey.MaxReleaseBytes, as "1.37", else none.
func referenceRelease(s string) string {
	r, err := catalog.ParseRelease(s)
	if err != nil || len(s) > countkey.MaxReleaseBytes {
		return ""
	}
	return r.String()
}

// first is the first of v, or "".
func first(v []string) string {
	if len(v) == 0 {
		return ""
	}
	return v[0]
}

// testAggregator classifies without a store, with the built-in field rules,
// at a fixed time near the events'.
func testAggregator(t testing.TB, now time.Time) *aggregate.Aggregator {
	rules, err := fieldrule.New(nil)
	require.NoError(t, err)
	return aggregate.New(aggregate.Options{Now: func() time.Time { return now }, FieldRules: rules})
}

// outcome is what became of a body's events, by result, with the counted
// requests named by ID and key, and those whose bodies field rules read.
type outcome struct {
	Results   map[classify.Result]int
	Counted   map[string]string
	Admission map[string]classify.Result
	Invalid   int
	Err       string
}

func plan(t testing.TB, a *aggregate.Aggregator, events []classify.Event, skipped classify.Prefiltered, bad Invalid, err error) outcome {
	o := outcome{Results: map[classify.Result]int{}, Counted: map[string]string{}, Admission: map[string]classify.Result{}, Invalid: bad.Count}
	if err != nil {
		o.Err = err.Error()
		return o
	}
	planned, perr := a.Plan(classify.Origin{Source: "test", Cluster: "c", Node: "n"}, events)
	require.NoError(t, perr)
	for i, p := range planned {
		if a.NeedsRequestObject(&events[i]) {
			// Field rules read this request's body.
			o.Counted["field:"+p.ID] = "selected"
		}
		o.Results[p.Result]++
		if p.Result == classify.ResultCounted {
			o.Counted[p.ID] = fmt.Sprintf("%+v %s", p.Key, p.RemovedRelease)
		}
		if p.Admission != "" {
			o.Admission[p.ID] = p.Admission
		}
	}
	o.Results[classify.ResultOtherStage] += skipped.OtherStage
	o.Results[classify.ResultNotDeprecated] += skipped.NotDeprecated
	maps.DeleteFunc(o.Results, func(_ classify.Result, n int) bool { return n == 0 })
	return o
}

// compareWithDecodeBody checks that the prefiltered decode of body comes to
// what the full decode does, event for event, and returns that.
func compareWithDecodeBody(t testing.TB, a *aggregate.Aggregator, body []byte) outcome {
	t.Helper()
	events, bad, err := DecodeBody(body)
	want := plan(t, a, events, classify.Prefiltered{}, bad, err)
	fevents, fbad, skipped, ferr := DecodeBodyFiltered(body, NewPrefilter(a.Interest()))
	for _, ev := range fevents {
		checkBounds(t, ev)
	}
	got := plan(t, a, fevents, skipped, fbad, ferr)
	if want.Err == "" && got.Invalid != want.Invalid {
		// Items set aside are not validated beyond their JSON and stage:
		// an invalid item that cannot count may be skipped instead.
		require.Less(t, got.Invalid, want.Invalid)
		skippedMore := 0
		for _, r := range []classify.Result{classify.ResultOtherStage, classify.ResultNotDeprecated} {
			require.GreaterOrEqual(t, got.Results[r], want.Results[r])
			skippedMore += got.Results[r] - want.Results[r]
			want.Results[r] = got.Results[r]
		}
		require.Equal(t, want.Invalid-got.Invalid, skippedMore)
		maps.DeleteFunc(want.Results, func(_ classify.Result, n int) bool { return n == 0 })
		want.Invalid = got.Invalid
	}
	require.Equal(t, want, got)
	return got
}

// reference decodes body as kube-apiserver's own types do, with
// encoding/json, and says which requests count; ok is false when
// encoding/json cannot decode it or an item has no auditID to name it by.
func reference(t testing.TB, a *aggregate.Aggregator, body []byte) (counted map[string]string, ok bool) {
	var list auditv1.EventList
	if json.Unmarshal(body, &list) != nil || list.Kind != KindEventList || list.APIVersion != APIVersion {
		return nil, false
	}
	events := make([]classify.Event, 0, len(list.Items))
	for _, e := range list.Items {
		if e.AuditID == "" || e.Stage == "" {
			return nil, false
		}
		// Sunset refuses items of another kind or version, as a
		// wrong-version sender must hear; the types just carry them.
		if e.Kind != "" && e.Kind != KindEvent || e.APIVersion != "" && e.APIVersion != APIVersion && e.APIVersion != APIVersionV1beta1 {
			continue
		}
		as, by := e.User, ""
		if e.ImpersonatedUser != nil && e.ImpersonatedUser.Username != "" {
			as, by = *e.ImpersonatedUser, e.User.Username
		}
		ev := classify.Event{ID: string(e.AuditID), Stage: string(e.Stage), Verb: e.Verb, Username: as.Username, ImpersonatedBy: by,
			UserAgent: e.UserAgent, Deprecated: e.Annotations[AnnotationDeprecated] == "true", RemovedRelease: referenceRelease(e.Annotations[AnnotationRemovedRelease]),
			RequestReceived: e.RequestReceivedTimestamp.Time, StageTime: e.StageTimestamp.Time, SourceIPs: e.SourceIPs}
		if e.RequestObject != nil {
			ev.RequestObject = e.RequestObject.Raw
		}
		ev.DryRun = dryRun(e.RequestURI, e.Verb, ev.RequestObject)
		if e.ObjectRef != nil {
			ev.ObjectRef = &classify.ObjectRef{Group: e.ObjectRef.APIGroup, Version: e.ObjectRef.APIVersion, Resource: e.ObjectRef.Resource, Subresource: e.ObjectRef.Subresource}
		}
		if e.ResponseStatus != nil {
			ev.ResponseCode = e.ResponseStatus.Code
		}
		if extra := as.Extra; extra != nil {
			ev.PodName = first(extra["authentication.kubernetes.io/pod-name"])
			ev.PodNode = first(extra["authentication.kubernetes.io/node-name"])
		}
		events = append(events, ev)
	}
	return plan(t, a, events, classify.Prefiltered{}, Invalid{}, nil).Counted, true
}

// The captured batches of a real kube-apiserver, and a generated stream of
// 3 % deprecated requests, come to the same counts through the prefilter.
// The counts are checked against an independent tally of the input.
func TestPrefilterCountsTheSameAsTheFullDecode(t *testing.T) {
	t.Parallel()
	names, err := filepath.Glob(filepath.Join(captured, "*.body"))
	require.NoError(t, err)
	require.Len(t, names, 8)
	var first time.Time
	counted := 0
	for _, n := range names {
		body, err := os.ReadFile(n)
		require.NoError(t, err)
		if first.IsZero() {
			var list auditv1.EventList
			require.NoError(t, json.Unmarshal(body, &list))
			first = list.Items[0].RequestReceivedTimestamp.Time
		}
		got := compareWithDecodeBody(t, testAggregator(t, first), body)
		counted += len(got.Counted)
		ref, ok := reference(t, testAggregator(t, first), body)
		require.True(t, ok, n)
		require.Equal(t, ref, got.Counted, n)
	}
	// The captures' deprecated completed requests (TestDecodesEveryCapturedBody).
	require.Equal(t, 66, counted)

	now := time.Date(2026, 11, 24, 10, 0, 0, 0, time.UTC)
	gen := auditgen.Options{Prefix: "gen", DeprecatedEvery: 33, At: now}
	body := gen.List(0, 4000)
	got := compareWithDecodeBody(t, testAggregator(t, now), body)
	require.Len(t, got.Counted, gen.CountDeprecated(0, 4000))
	require.Len(t, got.Counted, 122)
	require.Equal(t, map[classify.Result]int{classify.ResultCounted: 122, classify.ResultNotDeprecated: 4000 - 122}, got.Results)
}

// Inputs meant to trick a byte-level filter: each must come to the same
// counts as the full decode, and as encoding/json into the audit types.
func TestPrefilterIsNotTricked(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 24, 10, 0, 0, 0, time.UTC)
	ts := `"requestReceivedTimestamp":"2026-11-24T10:00:00.000000Z","stageTimestamp":"2026-11-24T10:00:01.000000Z"`
	ref := `"objectRef":{"resource":"endpoints","apiVersion":"v1"}`
	ev := func(id, rest string) string {
		return `{"auditID":"` + id + `","verb":"list","user":{"username":"u"},` + ts + `,` + rest + `}`
	}
	cases := map[string]struct {
		item    string
		counted bool
	}{
		"annotated":                  {ev("a", `"stage":"ResponseComplete",`+ref+`,"annotations":{"k8s.io/deprecated":"true"}`), true},
		"escaped annotation key":     {ev("a", `"stage":"ResponseComplete",`+ref+`,"annotations":{"k8s.io\/deprecated":"true"}`), true},
		"unicode-escaped key":        {ev("a", `"stage":"ResponseComplete",`+ref+`,"annotations":{"k8s.io/\u0064eprecated":"true"}`), true},
		"annotation key in caps":     {ev("a", `"stage":"ResponseComplete",`+ref+`,"annotations":{"K8S.IO/DEPRECATED":"true"}`), false},
		"escaped stage key":          {ev("a", `"st\u0061ge":"ResponseComplete",`+ref+`,"annotations":{"k8s.io/deprecated":"true"}`), true},
		"escaped stage value":        {ev("a", `"stage":"Response\u0043omplete",`+ref+`,"annotations":{"k8s.io/deprecated":"true"}`), true},
		"stage key in caps":          {ev("a", `"STAGE":"ResponseComplete",`+ref+`,"annotations":{"k8s.io/deprecated":"true"}`), true},
		"stage twice, last wins":     {ev("a", `"stage":"ResponseComplete","Stage":"RequestReceived",`+ref+`,"annotations":{"k8s.io/deprecated":"true"}`), false},
		"stage twice, complete last": {ev("a", `"stage":"RequestReceived","stage":"ResponseComplete",`+ref+`,"annotations":{"k8s.io/deprecated":"true"}`), true},
		"long s in stage key":        {ev("a", "\"\u017ftage\":\"ResponseComplete\","+ref+`,"annotations":{"k8s.io/deprecated":"true"}`), true},
		"key-like value":             {ev("a", `"stage":"ResponseComplete",`+ref+`,"userAgent":"\"k8s.io/deprecated\":\"true\"","annotations":{}`), false},
		"annotations in the request": {ev("a", `"stage":"ResponseComplete",`+ref+`,"requestObject":{"metadata":{"annotations":{"k8s.io/deprecated":"true"}}},"annotations":{}`), false},
		"annotations twice":          {ev("a", `"stage":"ResponseComplete",`+ref+`,"annotations":{"k8s.io/deprecated":"true"},"annotations":{"x":"y"}`), true},
		"annotation value not true":  {ev("a", `"stage":"ResponseComplete",`+ref+`,"annotations":{"k8s.io/deprecated":"false"}`), false},
		"invalid UTF-8":              {ev("a", "\"stage\":\"ResponseComplete\","+ref+",\"userAgent\":\"\xff\xfe\",\"annotations\":{\"k8s.io/deprecated\":\"true\"}"), true},
		"other stage":                {ev("a", `"stage":"RequestReceived",`+ref+`,"annotations":{"k8s.io/deprecated":"true"}`), false},
		"panic":                      {ev("a", `"stage":"Panic",`+ref+`,"annotations":{"k8s.io/deprecated":"true"}`), true},
		"404 to a removed API":       {ev("a", `"stage":"ResponseComplete","objectRef":{"resource":"podsecuritypolicies","apiGroup":"policy","apiVersion":"v1beta1"},"responseStatus":{"code":404}`), true},
		"404 in another case":        {ev("a", `"stage":"ResponseComplete","objectRef":{"resource":"podsecuritypolicies","apiGroup":"policy","apiVersion":"v1beta1"},"RESPONSESTATUS":{"CODE":404}`), true},
		"field rule":                 {ev("a", `"stage":"ResponseComplete","verb":"patch","objectRef":{"resource":"nodes","apiVersion":"v1","subresource":"status"},"requestObject":{"status":{"nodeInfo":{"kubeProxyVersion":"v1.30.0"}}}`), true},
		"field rule, escaped":        {ev("a", `"stage":"ResponseComplete","verb":"patch","objectRef":{"resource":"no\u0064es","apiVersion":"v1","subresource":"status"},"requestObject":{"status":{"nodeInfo":{"kubeProxyVersion":"v1.30.0"}}}`), true},
		"field rule, key in caps":    {ev("a", `"stage":"ResponseComplete","verb":"patch","objectRef":{"RESOURCE":"nodes","apiVersion":"v1","subresource":"status"},"requestObject":{"status":{"nodeInfo":{"kubeProxyVersion":"v1.30.0"}}}`), true},
		"field rule, last wins":      {ev("a", `"stage":"ResponseComplete","verb":"patch","objectRef":{"resource":"pods","resource":"nodes","apiVersion":"v1","subresource":"status"},"requestObject":{"status":{"nodeInfo":{"kubeProxyVersion":"v1.30.0"}}}`), true},
		"resource as a key":          {ev("a", `"stage":"ResponseComplete","verb":"patch","objectRef":{"nodes":"x","resource":"pods","apiVersion":"v1"}`), false},
		"deprecated null":            {ev("a", `"stage":"ResponseComplete",`+ref+`,"annotations":null`), false},
		"no stage":                   {ev("a", ref+`,"annotations":{"k8s.io/deprecated":"true"}`), false},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			a := testAggregator(t, now)
			body := []byte(`{"kind":"EventList","apiVersion":"audit.k8s.io/v1","items":[` + c.item + `]}`)
			got := compareWithDecodeBody(t, a, body)
			require.Equal(t, c.counted, len(got.Counted) == 1, "%+v", got)
			if want, ok := reference(t, a, body); ok {
				require.Equal(t, want, got.Counted)
			}
			// As a single event, as Kafka and log files carry them.
			_, skip := NewPrefilter(a.Interest()).Skip([]byte(c.item))
			require.False(t, skip && c.counted)
		})
	}
}

// Only an annotation's key can make an event the admission webhook
// counter's: one whose values alone name a webhook is set aside, as the
// decoder would judge it, and one with a webhook key never is.
func TestPrefilterFindsWebhooksByTheirKeys(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 24, 10, 0, 0, 0, time.UTC)
	a := testAggregator(t, now)
	p := NewPrefilter(a.Interest())
	ev := func(annotations string) string {
		return `{"auditID":"a","verb":"create","stage":"ResponseComplete","user":{"username":"u"},` +
			`"requestReceivedTimestamp":"2026-11-24T10:00:00.000000Z","stageTimestamp":"2026-11-24T10:00:01.000000Z",` +
			`"objectRef":{"resource":"configmaps","apiVersion":"v1"},"responseStatus":{"code":201},"annotations":` + annotations + `}`
	}
	for annotations, kept := range map[string]bool{
		`{"authorization.k8s.io/reason":"mutation.webhook.admission.k8s.io/round_0_index_0"}`:  false,
		`{"authorization.k8s.io/reason":"apiserver.latency.k8s.io/mutating-webhook"}`:          false,
		`{"authorization.k8s.io/reason":"missing-san.invalid-cert.kubernetes.io/example.com"}`: false,
		`{"x":"webhook","y":".invalid-cert.kubernetes.io/"}`:                                   false,
		`{"apiserver.latency.k8s.io/mutating-webhook":"600ms"}`:                                true,
		`{"x":"y","mutation.webhook.admission.k8s.io/round_0_index_0":"{}"}`:                   true,
		`{"missing-san.invalid-cert.kubernetes.io/example.com":"reason"}`:                      true,
		`{"x.webhook.admission.k8s.io/y":"z"}`:                                                 true,
	} {
		item := ev(annotations)
		_, skip := p.Skip([]byte(item))
		require.Equal(t, kept, !skip, "%s", annotations)
		compareWithDecodeBody(t, a, []byte(`{"kind":"EventList","apiVersion":"audit.k8s.io/v1","items":[`+item+`]}`))
	}
}

// Bodies that are not plain lists get DecodeBody's own answer.
func TestPrefilterLeavesBadBodiesToDecodeBody(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 24, 10, 0, 0, 0, time.UTC)
	a := testAggregator(t, now)
	item := `{"auditID":"x","stage":"ResponseComplete"}`
	for _, body := range []string{
		`{"kind":"EventList","apiVersion":"audit.k8s.io/v1","items":[` + item,
		`{"kind":"EventList","apiVersion":"audit.k8s.io/v1","items":[` + item + `]} trailing`,
		`{"kind":"EventList","apiVersion":"audit.k8s.io/v1beta1","items":[` + item + `]}`,
		`{"kind":"EventList","apiVersion":"audit.k8s.io/v1","items":[` + item + `],"kind":"Event"}`,
		`{"Kind":"EventList","apiVersion":"audit.k8s.io/v1","items":[` + item + `]}`,
		`{"kind":"EventList","apiVersion":"audit.k8s.io/v1","items":[` + item + `],"items":[]}`,
		`{"kind":"Event","apiVersion":"audit.k8s.io/v1","auditID":"x","stage":"ResponseComplete"}`,
		`{"kind":"EventList","apiVersion":"audit.k8s.io/v1","items":[1,"x",null,{"stage":5}]}`,
		`{"kind":"EventList","apiVersion":"audit.k8s.io/v1","items":{}}`,
		`[]`, ``, `{`,
	} {
		got := compareWithDecodeBody(t, a, []byte(body))
		if _, _, err := DecodeBody([]byte(body)); err == nil {
			require.Empty(t, got.Err)
			require.Empty(t, got.Counted, "nothing here is deprecated")
		}
	}
}

// An event set aside costs no allocation.
func TestPrefilterSkipDoesNotAllocate(t *testing.T) {
	now := time.Date(2026, 11, 24, 10, 0, 0, 0, time.UTC)
	p := NewPrefilter(testAggregator(t, now).Interest())
	raw := auditgen.Options{Prefix: "a", At: now}.Append(nil, 1)
	r, skip := p.Skip(raw)
	require.True(t, skip)
	require.Equal(t, classify.SetAside{Result: classify.ResultNotDeprecated, Read: true}, r, "auditgen's events are gets")
	require.Zero(t, testing.AllocsPerRun(100, func() { p.Skip(raw) }))
}

// FuzzPrefilter runs the prefiltered decode and the full one on the same
// body and requires the same counts; where encoding/json can decode the
// body into the audit types, those counts too.
func FuzzPrefilter(f *testing.F) {
	now := time.Date(2026, 11, 24, 10, 0, 0, 0, time.UTC)
	gen := auditgen.Options{Prefix: "f", DeprecatedEvery: 3, At: now}
	f.Add(gen.List(0, 6))
	body, err := os.ReadFile(filepath.Join(captured, "00007.body"))
	require.NoError(f, err)
	f.Add(body)
	f.Add([]byte(`{"kind":"EventList","apiVersion":"audit.k8s.io/v1","items":[{"auditID":"a","stage":"ResponseComplete","objectRef":{"resource":"endpoints","apiVersion":"v1"},"annotations":{"k8s.io/deprecated":"true"}}]}`))
	f.Add([]byte(`{"kind":"EventList","apiVersion":"audit.k8s.io/v1","items":[{"auditID":"a","stage":"ResponseComplete","annotations":{"r":"mutation.webhook.admission.k8s.io/round_0_index_0","apiserver.latency.k8s.io/mutating-webhook":"600ms"}}]}`))
	for _, b := range hostileSeeds() {
		f.Add(b)
	}
	a := testAggregator(f, now)
	f.Fuzz(func(t *testing.T, body []byte) {
		got := compareWithDecodeBody(t, a, body)
		if want, ok := reference(t, a, body); ok {
			require.Equal(t, want, got.Counted)
		}
		if _, skip := NewPrefilter(a.Interest()).Skip(body); skip {
			events, _, _ := DecodeBody(body)
			planned, err := a.Plan(classify.Origin{Cluster: "c", Node: "n"}, events)
			require.NoError(t, err)
			require.False(t, slices.ContainsFunc(planned, func(p aggregate.Planned) bool { return p.Result == classify.ResultCounted }))
		}
	})
}

// Every special byte at every position of the eight-byte steps.
func TestScannerFindsSpecialBytesAtEveryPosition(t *testing.T) {
	t.Parallel()
	for n := range 24 {
		for _, special := range []string{`\"`, `\\`, `\u0041`, `\q`, "\n", "\x01", "\x1f", "\x7f", "\xc3\xa9", "\xff", `"`} {
			s := `"` + strings.Repeat("a", n) + special + strings.Repeat("b", 24-n) + `"`
			b := []byte(s)
			end, flags := scanString(b, 0)
			ok := end == len(b)
			require.Equal(t, json.Valid(b), ok, "%q", s)
			if ok {
				require.Equal(t, strings.Contains(special, `\`), flags&flagEscaped != 0, "%q", s)
				require.Equal(t, special[0] >= 0x80, flags&flagNonASCII != 0, "%q", s)
			}
		}
	}
}

// The reads the prefilter sets aside, with those it leaves to the decoder,
// are every get, list and watch of the captures, as encoding/json reads
// them: the warning about clusters without reads sees them all.
func TestPrefilterTellsTheReadsItSetsAside(t *testing.T) {
	t.Parallel()
	names, err := filepath.Glob(filepath.Join(captured, "*.body"))
	require.NoError(t, err)
	var first time.Time
	reads, want, skippedReads := 0, 0, 0
	for _, n := range names {
		body, err := os.ReadFile(n)
		require.NoError(t, err)
		var list auditv1.EventList
		require.NoError(t, json.Unmarshal(body, &list))
		if first.IsZero() {
			first = list.Items[0].RequestReceivedTimestamp.Time
		}
		for _, e := range list.Items {
			if e.Verb == "get" || e.Verb == "list" || e.Verb == "watch" {
				want++
			}
		}
		events, _, skipped, err := DecodeBodyFiltered(body, NewPrefilter(testAggregator(t, first).Interest()))
		require.NoError(t, err)
		for _, e := range events {
			if e.Verb == "get" || e.Verb == "list" || e.Verb == "watch" {
				reads++
			}
		}
		reads += skipped.Reads
		skippedReads += skipped.Reads
	}
	require.Equal(t, want, reads)
	require.Equal(t, 857, want, "the captures' reads, as grep counts \"verb\":\"get\", list and watch")
	require.Equal(t, 670, skippedReads, "set aside by the prefilter")
}
