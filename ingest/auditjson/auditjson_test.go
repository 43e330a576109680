package auditjson

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kube-sunset/sunset/classify"
)

const captured = "../../testdata/apiserver-v1.36/webhook-metadata-batch"

func TestDecodesEveryCapturedBody(t *testing.T) {
	t.Parallel()
	names, err := filepath.Glob(filepath.Join(captured, "*.body"))
	require.NoError(t, err)
	require.Len(t, names, 8)
	total, deprecated := 0, 0
	for _, n := range names {
		body, err := os.ReadFile(n)
		require.NoError(t, err)
		events, bad, err := DecodeBody(body)
		require.NoError(t, err, n)
		require.Zero(t, bad.Count, n)
		total += len(events)
		for _, e := range events {
			if e.Deprecated && e.Stage == "ResponseComplete" {
				deprecated++
			}
		}
	}
	// 677 RequestReceived + 643 ResponseComplete + 39 ResponseStarted.
	require.Equal(t, 1359, total)
	require.Equal(t, 66, deprecated)
}

func TestDecodeEventExtractsTheCountedFields(t *testing.T) {
	t.Parallel()
	raw := []byte(`{"kind":"Event","apiVersion":"audit.k8s.io/v1","level":"Request","auditID":"a1","stage":"ResponseComplete",
		"requestURI":"/apis/storage.k8s.io/v1beta1/volumeattributesclasses?dryRun=All","verb":"create",
		"user":{"username":"bob","extra":{"authentication.kubernetes.io/pod-name":["p"]}},"userAgent":"bob-script/2.0",
		"objectRef":{"resource":"volumeattributesclasses","name":"gold","apiGroup":"storage.k8s.io","apiVersion":"v1beta1","subresource":"status"},
		"responseStatus":{"metadata":{},"code":201},
		"requestObject":{"kind":"VolumeAttributesClass","parameters":{"secret":"do-not-keep"}},
		"requestReceivedTimestamp":"2026-11-21T19:18:48.018394Z","stageTimestamp":"2026-11-21T19:18:48.030000Z",
		"annotations":{"k8s.io/deprecated":"true","k8s.io/removed-release":"1.37"}}`)
	got, err := DecodeEvent(raw)
	require.NoError(t, err)
	require.Equal(t, classify.Event{
		ID: "a1", Stage: "ResponseComplete", Verb: "create",
		Username: "bob", UserAgent: "bob-script/2.0",
		ObjectRef:    &classify.ObjectRef{Group: "storage.k8s.io", Version: "v1beta1", Resource: "volumeattributesclasses", Subresource: "status"},
		ResponseCode: 201, Deprecated: true, RemovedRelease: "1.37",
		RequestReceived: time.Date(2026, 11, 21, 19, 18, 48, 18394000, time.UTC),
		StageTime:       time.Date(2026, 11, 21, 19, 18, 48, 30000000, time.UTC),
		DryRun:          true,
		PodName:         "p",
		// Kept in memory for field rules only.
		RequestObject: []byte(`{"kind":"VolumeAttributesClass","parameters":{"secret":"do-not-keep"}}`),
	}, got)

	// Without an auditID, identical bytes give an identical ID.
	noID := []byte(`{"stage":"ResponseComplete","verb":"get"}`)
	a, err := DecodeEvent(noID)
	require.NoError(t, err)
	b, err := DecodeEvent(append([]byte(nil), noID...))
	require.NoError(t, err)
	require.Equal(t, a.ID, b.ID)
	require.Equal(t, "sha256:", a.ID[:7])
}

// FuzzDecodeBody checks that no input makes the decoder panic, that a
// rejected body always has a reason, and that what it keeps is within its
// bounds.
func FuzzDecodeBody(f *testing.F) {
	body, err := os.ReadFile(filepath.Join(captured, "00007.body"))
	require.NoError(f, err)
	for _, seed := range []string{string(body), `{"kind":"Event","apiVersion":"audit.k8s.io/v1","stage":"Panic"}`, `{"kind":"EventList","apiVersion":"audit.k8s.io/v1","items":[1,"x",{}]}`, `[]`, `{`} {
		f.Add([]byte(seed))
	}
	for _, b := range hostileSeeds() {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		events, bad, err := DecodeBody(b)
		// Whatever the input, every event is within the decoder's bounds.
		for _, ev := range events {
			checkBounds(t, ev)
		}
		if err != nil {
			var e *Error
			if !errors.As(err, &e) || e.Reason == "" || e.Message == "" {
				t.Fatalf("error without reason: %v", err)
			}
		}
		byReason := 0
		for reason, n := range bad.ByReason {
			if reason == "" || n <= 0 {
				t.Fatalf("item errors without reason")
			}
			byReason += n
		}
		if byReason != bad.Count || len(bad.Samples) != min(bad.Count, MaxSamples) {
			t.Fatalf("%d invalid items, %d by reason, %d samples", bad.Count, byReason, len(bad.Samples))
		}
		for _, it := range bad.Samples {
			if it.Err == nil || it.Err.Reason == "" {
				t.Fatalf("item error without reason")
			}
		}
	})
}
