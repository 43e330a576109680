package auditjson

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	auditv1 "k8s.io/apiserver/pkg/apis/audit/v1"

	"github.com/kube-sunset/sunset/classify"
)

// withoutFacts drops what only the admission path fills in.
func withoutFacts(events []classify.Event) (out []classify.Event, facts int) {
	for _, e := range events {
		if e.Admission != nil {
			facts++
		}
		e.Admission = nil
		out = append(out, e)
	}
	return out, facts
}

// The admission path decodes everything else exactly as the plain one, on
// every real capture: each webhook batch, and the Request-level log whose
// widget requests carry webhook annotations, as one batch and line by line.
func TestAdmissionPathDecodesTheSameEvents(t *testing.T) {
	t.Parallel()
	bodies, err := filepath.Glob("../../testdata/apiserver-v1.36/webhook-metadata-batch/*.body")
	require.NoError(t, err)
	require.Len(t, bodies, 8)
	var all [][]byte
	for _, b := range bodies {
		body, err := os.ReadFile(b)
		require.NoError(t, err)
		all = append(all, body)
	}
	f, err := os.Open("../../testdata/apiserver-v1.36/request-level-blocking/audit-log-file.jsonl")
	require.NoError(t, err)
	defer f.Close()
	var lines [][]byte
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		lines = append(lines, bytes.Clone(sc.Bytes()))
	}
	require.NoError(t, sc.Err())
	all = append(all, append(append([]byte(`{"kind":"EventList","apiVersion":"audit.k8s.io/v1","items":[`), bytes.Join(lines, []byte(","))...), ']', '}'))

	totalFacts := 0
	for i, body := range all {
		plain, badPlain, err := decodeBody[wireEvent](body)
		require.NoError(t, err)
		withAdmission, badAdmission, err := decodeBody[wireEventWithAdmission](body)
		require.NoError(t, err)
		got, facts := withoutFacts(withAdmission)
		require.Equal(t, plain, got, "body %d", i)
		require.Equal(t, badPlain, badAdmission)
		totalFacts += facts
	}
	require.Equal(t, 6, totalFacts)

	lineFacts := 0
	for _, l := range lines {
		plain, err := decodeEvent[wireEvent](l)
		require.NoError(t, err)
		ev, err := DecodeEvent(l)
		require.NoError(t, err)
		if ev.Admission != nil {
			lineFacts++
		}
		ev.Admission = nil
		require.Equal(t, plain, ev)
	}
	require.Equal(t, 6, lineFacts)
}

// A type error in the annotations reads the same on both paths.
func TestAdmissionPathErrors(t *testing.T) {
	t.Parallel()
	for _, raw := range []string{
		`{"auditID":"x","stage":"ResponseComplete","annotations":"webhook.admission.k8s.io/"}`,
		`{"auditID":"x","stage":"ResponseComplete","annotations":{"k8s.io/deprecated":true,"mutation.webhook.admission.k8s.io/round_0_index_0":"{}"}}`,
	} {
		_, errPlain := decodeEvent[wireEvent]([]byte(raw))
		_, errAdmission := DecodeEvent([]byte(raw))
		require.Error(t, errPlain)
		require.Equal(t, errPlain, errAdmission, raw)
	}
}

// Keys encoding/json matches although they are not written as
// kube-apiserver writes them: other cases, escapes, the Kelvin sign and the
// long s. In a batch that takes the admission path (one event has webhook
// annotations), every one decodes as on the plain path.
func TestAdmissionPathMatchesKeysAsEncodingJSON(t *testing.T) {
	t.Parallel()
	items := []string{
		`{"auditID":"w","stage":"ResponseComplete","annotations":{"apiserver.latency.k8s.io/mutating-webhook":"1s"}}`,
		`{"auditID":"plain","stage":"ResponseComplete","annotations":{"authorization.k8s.io/reason":"RBAC: allowed by ClusterRoleBinding \"admins\" /x"}}`,
	}
	for i, key := range []string{
		`k8s.io/deprecated`, `K8S.IO/DEPRECATED`, `k8s.io/DePrEcAtEd`, `k8s.io\/deprecated`, `k8s.io\u002fdeprecated`,
		`k8s.io\u002Fdeprecated`, `k8s.io/\u0064eprecated`, `k8s.io/deprecate\u0064`, "\u212a8s.io/deprecated", "k8\u017f.io/deprecated",
		`k8s.io/removed-release`, `K8S.IO/REMOVED-RELEASE`, "k8s.io/removed-relea\u017fe", "k8s.io/removed-releaſe",
		`k8s.io/deprecated-not`, `x/deprecated`,
	} {
		// Each key with a value its annotation keeps, should it match.
		value := "true"
		if strings.Contains(strings.ToLower(key), "removed") {
			value = "1.37"
		}
		items = append(items, `{"auditID":"k`+strconv.Itoa(i)+`","stage":"ResponseComplete","annotations":{"`+key+`":"`+value+`"}}`)
	}
	items = append(items,
		`{"auditID":"num","stage":"ResponseComplete","annotations":{"k8s.io/deprecated":1}}`,
		`{"auditID":"nul","stage":"ResponseComplete","annotations":null}`,
		`{"auditID":"arr","stage":"ResponseComplete","annotations":[]}`,
	)
	for _, it := range items[2:] {
		// Each alone as well: a type error fails the fast path for the
		// whole list, so check single events too.
		body := []byte(`{"kind":"EventList","apiVersion":"audit.k8s.io/v1","items":[` + items[0] + `,` + it + `]}`)
		// A list with a bad item is decoded item by item, by DecodeEvent,
		// on either path: compare without the facts.
		plain, badPlain, errPlain := decodeBody[wireEvent](body)
		got, badGot, errGot := DecodeBody(body)
		require.Equal(t, errPlain, errGot, it)
		got, facts := withoutFacts(got)
		plain, _ = withoutFacts(plain)
		require.Equal(t, plain, got, it)
		require.Equal(t, badPlain, badGot, it)
		require.Equal(t, 1, facts, it)
	}
	deprecated := 0
	body := []byte(`{"kind":"EventList","apiVersion":"audit.k8s.io/v1","items":[` + strings.Join(items[:len(items)-3], ",") + `]}`)
	events, _, err := DecodeBody(body)
	require.NoError(t, err)
	for _, e := range events {
		if e.Deprecated || e.RemovedRelease != "" {
			deprecated++
		}
	}
	// The audit types keep annotations in a map: a key matches after
	// unescaping, but never in another case or with folded letters. Seven
	// keys name one of the two annotations, for encoding/json into
	// auditv1.EventList as for Sunset.
	var ref auditv1.EventList
	require.NoError(t, json.Unmarshal(body, &ref))
	want := 0
	for _, e := range ref.Items {
		if e.Annotations[AnnotationDeprecated] != "" || e.Annotations[AnnotationRemovedRelease] != "" {
			want++
		}
	}
	require.Equal(t, 7, want)
	require.Equal(t, want, deprecated)
	require.False(t, mayNameDeprecation([]byte(`{"authorization.k8s.io/reason":"RBAC: allowed by ClusterRoleBinding \"admins\" of ClusterRole \"cluster-admin\""}`)))
}
