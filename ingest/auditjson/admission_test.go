package auditjson

import (
	"bufio"
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kube-sunset/sunset/aggregate"
)

// withoutFacts drops what only the admission path fills in.
func withoutFacts(events []aggregate.Event) (out []aggregate.Event, facts int) {
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
