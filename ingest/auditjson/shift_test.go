package auditjson

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestShiftMovesTimestampsAndKeepsIdentity(t *testing.T) {
	t.Parallel()
	// As kube-apiserver writes it: 6 fractional digits, \u0026 escapes.
	raw := []byte(`{"kind":"Event","apiVersion":"audit.k8s.io/v1","auditID":"a1","stage":"ResponseComplete","requestURI":"/api/v1/endpoints?limit=500\u0026watch=1","verb":"list","user":{"username":"alice"},"requestReceivedTimestamp":"2026-11-21T19:18:03.123456Z","stageTimestamp":"2026-11-21T19:18:03.200001Z","annotations":{"k8s.io/deprecated":"true"}}`)
	out, err := Shift(raw, 42*time.Hour)
	require.NoError(t, err)
	require.Equal(t, `{"annotations":{"k8s.io/deprecated":"true"},"apiVersion":"audit.k8s.io/v1","auditID":"a1","kind":"Event","requestReceivedTimestamp":"2026-11-23T13:18:03.123456Z","requestURI":"/api/v1/endpoints?limit=500\u0026watch=1","stage":"ResponseComplete","stageTimestamp":"2026-11-23T13:18:03.200001Z","sunsetIdentityTimestamp":"2026-11-21T19:18:03.123456Z","user":{"username":"alice"},"verb":"list"}`, string(out)) //nolint:testifylint // Byte for byte: shifting keeps everything but the times as it was.
	before, err := DecodeEvent(raw)
	require.NoError(t, err)
	after, err := DecodeEvent(out)
	require.NoError(t, err)
	require.Equal(t, before.ID, after.ID)
	require.Equal(t, before.RequestReceived.Add(42*time.Hour), after.RequestReceived)
	require.Equal(t, before.StageTime.Add(42*time.Hour), after.StageTime)
	require.Equal(t, before.RequestReceived, after.IdentityTime, "the request is identified by when it first happened")
	before.RequestReceived, before.StageTime, after.RequestReceived, after.StageTime = time.Time{}, time.Time{}, time.Time{}, time.Time{}
	after.IdentityTime = time.Time{}
	require.Equal(t, before, after, "nothing else changes")

	// Without an auditID the event is identified by its original bytes,
	// shifted or not; an event without timestamps stays where it is.
	noID := []byte(`{"stage":"ResponseComplete","verb":"get","requestReceivedTimestamp":"2026-11-21T19:18:03Z"}`)
	orig, err := DecodeEvent(noID)
	require.NoError(t, err)
	out, err = Shift(noID, -3*time.Hour)
	require.NoError(t, err)
	require.Equal(t, `{"auditID":"`+orig.ID+`","requestReceivedTimestamp":"2026-11-21T16:18:03Z","stage":"ResponseComplete","sunsetIdentityTimestamp":"2026-11-21T19:18:03Z","verb":"get"}`, string(out))
	// Shifted again, it keeps the time it first happened.
	again, err := Shift(out, time.Hour)
	require.NoError(t, err)
	require.Equal(t, `{"auditID":"`+orig.ID+`","requestReceivedTimestamp":"2026-11-21T17:18:03Z","stage":"ResponseComplete","sunsetIdentityTimestamp":"2026-11-21T19:18:03Z","verb":"get"}`, string(again))
	empty := []byte(`{"auditID":"","stage":"Panic","stageTimestamp":""}`)
	out, err = Shift(empty, time.Hour)
	require.NoError(t, err)
	require.Equal(t, `{"auditID":"`+digestID(empty)+`","stage":"Panic","stageTimestamp":""}`, string(out))

	for in, msg := range map[string]string{
		`{"stage":"x","requestReceivedTimestamp":"yesterday"}`: "requestReceivedTimestamp is not an RFC 3339 time",
		`{"stage":"x","stageTimestamp":7}`:                     "stageTimestamp is not a string",
		`{"stage":`:                                            "event is not valid JSON at byte offset 9: unexpected end of JSON input",
	} {
		_, err := Shift([]byte(in), time.Hour)
		require.EqualError(t, err, msg, in)
	}
}
