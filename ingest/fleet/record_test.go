package fleet

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kube-sunset/sunset/countkey"
)

var (
	hour = time.Date(2026, 11, 21, 19, 0, 0, 0, time.UTC)
	// now is the reader's clock in these tests.
	now = hour.Add(30 * time.Minute)
)

func TestFleetRecordRoundTrip(t *testing.T) {
	req := countkey.Request{
		ID: "0b7e5c1a-6a2f-4c4b-9b8f-3c2d1e0f9a8b",
		Key: countkey.CountKey{Cluster: "prod-eu", API: "volumeattributesclasses.v1beta1.storage.k8s.io",
			Cell: countkey.Cell{Hour: hour, Node: "master-1", Subresource: "status", Username: "system:serviceaccount:csi:driver",
				UserAgent: "csi-resizer/v1.9.0", Verb: "patch", DryRun: true}, Removed: true},
		RemovedRelease: "1.37",
		Seen: &countkey.Sighting{PodName: "csi-0", PodNode: "worker-2", SourceIPs: []string{"10.0.0.7", "fd00::7"},
			ImpersonatedBy: "alice", At: hour.Add(17 * time.Minute)},
	}
	m, err := message(req)
	require.NoError(t, err)
	require.Equal(t, "prod-eu/0b7e5c1a-6a2f-4c4b-9b8f-3c2d1e0f9a8b", string(m.Key))
	require.JSONEq(t, `{"v":1,"cluster":"prod-eu","id":"0b7e5c1a-6a2f-4c4b-9b8f-3c2d1e0f9a8b",
		"api":"volumeattributesclasses.v1beta1.storage.k8s.io","subresource":"status","hour":"2026-11-21T19:00:00Z",
		"node":"master-1","user":"system:serviceaccount:csi:driver","userAgent":"csi-resizer/v1.9.0","verb":"patch",
		"dryRun":true,"removed":true,"removedRelease":"1.37",
		"seen":{"pod":"csi-0","podNode":"worker-2","sourceIPs":["10.0.0.7","fd00::7"],"impersonatedBy":"alice","at":"2026-11-21T19:17:00Z"}}`, string(m.Value))
	got, err := decodeRecord(m.Value, now)
	require.NoError(t, err)
	require.Equal(t, req, got)

	// A field rule's match of the same request goes to the same partition.
	field := countkey.Request{ID: req.ID + "#field:kube-proxy-version", FieldRule: "kube-proxy-version",
		Key: countkey.CountKey{Cluster: "prod-eu", Cell: countkey.Cell{Hour: hour, Node: "master-1", Verb: "patch"}}}
	fm, err := message(field)
	require.NoError(t, err)
	require.Equal(t, m.Key, fm.Key)
	require.JSONEq(t, `{"v":1,"cluster":"prod-eu","id":"0b7e5c1a-6a2f-4c4b-9b8f-3c2d1e0f9a8b#field:kube-proxy-version",
		"api":"field:kube-proxy-version","hour":"2026-11-21T19:00:00Z","node":"master-1","user":"","verb":"patch"}`, string(fm.Value),
		"the format of replicas that stored field rules as APIs")
	got, err = decodeRecord(fm.Value, now)
	require.NoError(t, err)
	require.Equal(t, field, got)
}

func TestFleetRecordRejectsBadInput(t *testing.T) {
	for _, tc := range []struct {
		name, value string
		want        error
		says        string
	}{
		{"not JSON", `nope`, errMalformed, "fleet: malformed record: invalid character 'o' in literal null (expecting 'u')"},
		{"no version", `{"cluster":"c","id":"i","api":"a","hour":"2026-11-21T19:00:00Z"}`, errMalformed, "fleet: malformed record: no version"},
		{"newer Sunset", `{"v":2,"cluster":"c"}`, errNewVersion, "fleet: record from a newer Sunset; upgrade this replica (version 2)"},
		{"no cluster", `{"v":1,"id":"i","api":"a","hour":"2026-11-21T19:00:00Z"}`, errMalformed, "fleet: malformed record: cluster, id and api are required"},
		{"no hour", `{"v":1,"cluster":"c","id":"i","api":"a"}`, errMalformed, "fleet: malformed record: hour 0001-01-01 00:00:00 +0000 UTC is not a whole hour"},
		{"not a whole hour", `{"v":1,"cluster":"c","id":"i","api":"a","hour":"2026-11-21T19:05:00Z"}`, errMalformed, "fleet: malformed record: hour 2026-11-21 19:05:00 +0000 UTC is not a whole hour"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := decodeRecord([]byte(tc.value), now)
			require.ErrorIs(t, err, tc.want)
			require.EqualError(t, err, tc.says)
		})
	}
}

// Every field of a record is a sender's: a record with a field this
// version does not know, a value over its bound or an hour after the
// reader's clock (beyond a small skew) is skipped with its own reason,
// and the error never quotes what it held.
func TestFleetRecordValidatesFields(t *testing.T) {
	long := strings.Repeat("x", 70000)
	valid := func(edit string) string {
		return `{"v":1,"cluster":"c","id":"i","api":"endpoints.v1","hour":"2026-11-21T19:00:00Z","node":"n","user":"u","verb":"get"` + edit + `}`
	}
	_, err := decodeRecord([]byte(valid("")), now)
	require.NoError(t, err)
	for _, tc := range []struct {
		name, value, reason, says string
	}{
		{"unknown field", valid(`,"secret":"x"`), reasonUnknownField, "fleet: record with a field this version does not know"},
		{"unknown field of seen", valid(`,"seen":{"at":"2026-11-21T19:00:00Z","token":"x"}`), reasonUnknownField, "fleet: record with a field this version does not know"},
		{"long id", valid(`,"id":"` + long + `"`), reasonTooLong, "fleet: record with a value over its bound: id"},
		{"long cluster", valid(`,"cluster":"` + strings.Repeat("c", 254) + `"`), reasonTooLong, "fleet: record with a value over its bound: cluster"},
		{"long node", valid(`,"node":"` + strings.Repeat("n", 254) + `"`), reasonTooLong, "fleet: record with a value over its bound: node"},
		{"long user agent", valid(`,"userAgent":"` + strings.Repeat("a", 1025) + `"`), reasonTooLong, "fleet: record with a value over its bound: userAgent"},
		{"eleven source IPs", valid(`,"seen":{"at":"2026-11-21T19:00:00Z","sourceIPs":["1","2","3","4","5","6","7","8","9","10","11"]}`), reasonTooLong, "fleet: record with a value over its bound: seen.sourceIPs"},
		{"next hour", valid(`,"hour":"2026-11-21T20:00:00Z"`), reasonFuture, "fleet: record of an hour in the future: 2026-11-21T20:00:00Z"},
		{"a year ahead", valid(`,"hour":"2027-11-21T19:00:00Z"`), reasonFuture, "fleet: record of an hour in the future: 2027-11-21T19:00:00Z"},
		{"two records in one", valid("") + valid(""), reasonMalformed, "fleet: malformed record: data after the record"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := decodeRecord([]byte(tc.value), now)
			require.EqualError(t, err, tc.says)
			require.Equal(t, tc.reason, reason(err))
		})
	}
	// The next hour begins within the skew: it is counted.
	_, err = decodeRecord([]byte(valid(`,"hour":"2026-11-21T20:00:00Z"`)), hour.Add(50*time.Minute))
	require.NoError(t, err)
	// At the bounds, records are counted.
	_, err = decodeRecord([]byte(valid(`,"cluster":"`+strings.Repeat("c", 253)+`","node":"`+strings.Repeat("n", 253)+`"`)), now)
	require.NoError(t, err)
}
