package fleet

import (
	"errors"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kube-sunset/sunset/countkey"
)

// validRecord is a record decodeRecord takes at now, with edit's fields
// added after the others: a repeated key takes the last value, as
// encoding/json does.
func validRecord(edit string) string {
	return `{"v":1,"cluster":"c","id":"i","api":"endpoints.v1","hour":"2026-11-21T19:00:00Z","node":"n","user":"u","verb":"get"` + edit + `}`
}

// The version is checked first: a record of a newer Sunset is skipped as
// unknown_version whatever else it holds; one without a version, or with
// 0 or less, is malformed.
func TestFleetRecordVersion(t *testing.T) {
	for _, tc := range []struct {
		name, value, reason, says string
	}{
		{"version 0", validRecord(`,"v":0`), reasonMalformed, "fleet: malformed record: no version"},
		{"negative version", validRecord(`,"v":-1`), reasonMalformed, "fleet: malformed record: no version"},
		{"next version", validRecord(`,"v":2`), reasonNewVersion, "fleet: record from a newer Sunset; upgrade this replica (version 2)"},
		{"newer version with nothing else", `{"v":7}`, reasonNewVersion, "fleet: record from a newer Sunset; upgrade this replica (version 7)"},
		{"newer version with a field too long", validRecord(`,"v":3,"cluster":"` + strings.Repeat("c", 300) + `"`), reasonNewVersion, "fleet: record from a newer Sunset; upgrade this replica (version 3)"},
		{"newer version in the future", validRecord(`,"v":2,"hour":"2030-01-01T00:00:00Z"`), reasonNewVersion, "fleet: record from a newer Sunset; upgrade this replica (version 2)"},
		// A newer version with a field this one does not know is
		// unknown_field: the decoder refuses it before the version is
		// read.
		{"newer version with a new field", validRecord(`,"v":2,"region":"eu"`), reasonUnknownField, "fleet: record with a field this version does not know"},
		{"version as a string", validRecord(`,"v":"1"`), reasonMalformed, "fleet: malformed record: json: cannot unmarshal string into Go struct field record.v of type int"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := decodeRecord([]byte(tc.value), now)
			require.EqualError(t, err, tc.says)
			require.Equal(t, tc.reason, reason(err))
		})
	}
}

// cluster, id and api are required, and empty is missing.
func TestFleetRecordRequiredFields(t *testing.T) {
	for _, value := range []string{validRecord(`,"cluster":""`), validRecord(`,"id":""`), validRecord(`,"api":""`),
		`{"v":1,"cluster":null,"id":"i","api":"endpoints.v1","hour":"2026-11-21T19:00:00Z"}`,
		`{"v":1,"cluster":"c","api":"endpoints.v1","hour":"2026-11-21T19:00:00Z"}`,
		`{"v":1,"cluster":"c","id":"i","hour":"2026-11-21T19:00:00Z"}`} {
		_, err := decodeRecord([]byte(value), now)
		require.EqualError(t, err, "fleet: malformed record: cluster, id and api are required", value)
		require.ErrorIs(t, err, errMalformed)
		require.Equal(t, reasonMalformed, reason(err))
	}
	// Node, user and verb may be empty: the store keeps "".
	got, err := decodeRecord([]byte(`{"v":1,"cluster":"c","id":"i","api":"endpoints.v1","hour":"2026-11-21T19:00:00Z"}`), now)
	require.NoError(t, err)
	require.Equal(t, countkey.Request{ID: "i", Key: countkey.CountKey{Cluster: "c", API: "endpoints.v1", Cell: countkey.Cell{Hour: hour}}}, got)
}

// The hour must be a whole UTC hour: an offset is taken as the instant it
// names, so +05:30 at half past is a whole hour, and +05:30 on the hour
// is not.
func TestFleetRecordWholeHour(t *testing.T) {
	for _, tc := range []struct{ hour, says string }{
		{"2026-11-21T19:00:01Z", "fleet: malformed record: hour 2026-11-21 19:00:01 +0000 UTC is not a whole hour"},
		{"2026-11-21T19:00:00.000000001Z", "fleet: malformed record: hour 2026-11-21 19:00:00.000000001 +0000 UTC is not a whole hour"},
		{"2026-11-21T19:00:00+05:30", "fleet: malformed record: hour 2026-11-21 19:00:00 +0530 +0530 is not a whole hour"},
		{"0001-01-01T00:00:00Z", "fleet: malformed record: hour 0001-01-01 00:00:00 +0000 UTC is not a whole hour"},
	} {
		_, err := decodeRecord([]byte(validRecord(`,"hour":"`+tc.hour+`"`)), now)
		require.EqualError(t, err, tc.says, tc.hour)
		require.Equal(t, reasonMalformed, reason(err))
	}
	for in, want := range map[string]time.Time{
		"2026-11-21T19:30:00+05:30": hour.Add(-5 * time.Hour),
		"2026-11-21T20:00:00+01:00": hour,
		"2026-11-21T18:00:00.000Z":  hour.Add(-time.Hour),
	} {
		got, err := decodeRecord([]byte(validRecord(`,"hour":"`+in+`"`)), now)
		require.NoError(t, err, in)
		require.Equal(t, want, got.Key.Hour, in)
		require.Equal(t, time.UTC, got.Key.Hour.Location(), "the store's hours are UTC")
	}
}

// An hour may begin up to maxClockSkew after the reader's clock, and not a
// nanosecond later.
func TestFleetRecordClockSkewBound(t *testing.T) {
	next := validRecord(`,"hour":"2026-11-21T20:00:00Z"`)
	// 19:50 + 10 minutes is 20:00 exactly.
	got, err := decodeRecord([]byte(next), hour.Add(50*time.Minute))
	require.NoError(t, err)
	require.Equal(t, hour.Add(time.Hour), got.Key.Hour)

	_, err = decodeRecord([]byte(next), hour.Add(50*time.Minute-time.Nanosecond))
	require.EqualError(t, err, "fleet: record of an hour in the future: 2026-11-21T20:00:00Z")
	require.ErrorIs(t, err, errFuture)
	require.Equal(t, reasonFuture, reason(err))

	// The message is in UTC, whatever offset the sender wrote.
	_, err = decodeRecord([]byte(validRecord(`,"hour":"2026-11-21T22:00:00+01:00"`)), now)
	require.EqualError(t, err, "fleet: record of an hour in the future: 2026-11-21T21:00:00Z")
	// Past hours are the store's to expire, not the decoder's.
	_, err = decodeRecord([]byte(validRecord(`,"hour":"2020-01-01T00:00:00Z"`)), now)
	require.NoError(t, err)
}

// Every bounded field is taken at its bound and refused one byte over it,
// by name, as too_long; the error never quotes the value. The bounds are
// written out: they are the wire format's, which every replica of a fleet
// must agree on (id: countkey.MaxIDBytes and a field rule's suffix; api:
// resource.version.group; a field rule's match: its prefix and name).
func TestFleetRecordFieldBounds(t *testing.T) {
	rule := func(n int) string { return wireFieldRulePrefix + strings.Repeat("r", n) }
	seen := func(field string) func(string) string {
		return func(v string) string { return `,"seen":{"at":"2026-11-21T19:10:00Z","` + field + `":"` + v + `"}` }
	}
	str := func(field string) func(string) string {
		return func(v string) string { return `,"` + field + `":"` + v + `"` }
	}
	for _, tc := range []struct {
		field string
		max   int
		edit  func(string) string
		// value is the field's value of n bytes; x repeated if nil.
		value func(n int) string
	}{
		{"cluster", 253, str("cluster"), nil},
		{"id", 388, str("id"), nil},
		{"api", 381, str("api"), nil},
		{"api", len("field:") + 253, str("api"), func(n int) string { return rule(n - len(wireFieldRulePrefix)) }},
		{"subresource", 253, str("subresource"), nil},
		{"node", 253, str("node"), nil},
		{"user", 512, str("user"), nil},
		{"userAgent", 1024, str("userAgent"), nil},
		{"verb", 63, str("verb"), nil},
		{"removedRelease", 32, str("removedRelease"), nil},
		{"seen.pod", 253, seen("pod"), nil},
		{"seen.podNode", 253, seen("podNode"), nil},
		{"seen.impersonatedBy", 512, seen("impersonatedBy"), nil},
	} {
		value := tc.value
		if value == nil {
			value = func(n int) string { return strings.Repeat("x", n) }
		}
		name := fmt.Sprintf("%s of %d", tc.field, tc.max)
		require.Len(t, value(tc.max), tc.max)
		_, err := decodeRecord([]byte(validRecord(tc.edit(value(tc.max)))), now)
		require.NoError(t, err, name)
		over := value(tc.max + 1)
		_, err = decodeRecord([]byte(validRecord(tc.edit(over))), now)
		require.EqualError(t, err, "fleet: record with a value over its bound: "+tc.field, name)
		require.ErrorIs(t, err, errTooLong)
		require.Equal(t, reasonTooLong, reason(err), name)
	}
	// A field rule's match is bounded by the rule's name, tighter than an
	// API: 260 bytes are refused with the prefix and taken without.
	_, err := decodeRecord([]byte(validRecord(`,"api":"`+rule(254)+`"`)), now)
	require.EqualError(t, err, "fleet: record with a value over its bound: api")
	_, err = decodeRecord([]byte(validRecord(`,"api":"`+strings.Repeat("x", len(rule(254)))+`"`)), now)
	require.NoError(t, err)

	// Source IPs: ten, each of up to 64 bytes.
	ips := func(n, size int) string {
		list := make([]string, n)
		for i := range list {
			list[i] = `"` + strings.Repeat("1", size) + `"`
		}
		return `,"seen":{"at":"2026-11-21T19:10:00Z","sourceIPs":[` + strings.Join(list, ",") + `]}`
	}
	_, err = decodeRecord([]byte(validRecord(ips(10, 64))), now)
	require.NoError(t, err)
	for _, edit := range []string{ips(11, 1), ips(1, 65)} {
		_, err = decodeRecord([]byte(validRecord(edit)), now)
		require.EqualError(t, err, "fleet: record with a value over its bound: seen.sourceIPs")
		require.Equal(t, reasonTooLong, reason(err))
	}
}

// With several fields over their bounds, the first in the record's order
// is named.
func TestFleetRecordFirstFieldOverItsBoundIsNamed(t *testing.T) {
	long := strings.Repeat("x", 2000)
	_, err := decodeRecord([]byte(validRecord(`,"verb":"`+long+`","node":"`+long+`","seen":{"at":"2026-11-21T19:10:00Z","pod":"`+long+`"}`)), now)
	require.EqualError(t, err, "fleet: record with a value over its bound: node")
	_, err = decodeRecord([]byte(validRecord(`,"removedRelease":"`+long+`","seen":{"at":"2026-11-21T19:10:00Z","pod":"`+long+`"}`)), now)
	require.EqualError(t, err, "fleet: record with a value over its bound: removedRelease")
	// A malformed hour is reported before a field over its bound.
	_, err = decodeRecord([]byte(validRecord(`,"node":"`+long+`","hour":"2026-11-21T19:30:00Z"`)), now)
	require.EqualError(t, err, "fleet: malformed record: hour 2026-11-21 19:30:00 +0000 UTC is not a whole hour")
}

// reason maps each decodeRecord error, wrapped or not, to its metric
// label; anything else is malformed.
func TestFleetRecordReasons(t *testing.T) {
	for err, want := range map[error]string{
		errNewVersion: reasonNewVersion,
		fmt.Errorf("%w (version 9)", errNewVersion): reasonNewVersion,
		errUnknownField:                            reasonUnknownField,
		fmt.Errorf("%w: seen.pod", errTooLong):     reasonTooLong,
		fmt.Errorf("%w: 2030", errFuture):          reasonFuture,
		fmt.Errorf("%w: no version", errMalformed): reasonMalformed,
		errors.New("anything else"):                reasonMalformed,
	} {
		require.Equal(t, want, reason(err), err.Error())
	}
}

// A record whose sourceIPs lists a million empty strings is refused as
// too long on the fast path and on encoding/json's (which an escaped key
// reaches), and neither holds the list: decoding it allocates a small
// fraction of what a million strings would take.
func TestFleetRecordSourceIPsBombIsWalkedNotHeld(t *testing.T) {
	list := `[""` + strings.Repeat(`,""`, 1<<20-1) + `]`
	for name, record := range map[string]string{
		"fast path":     validRecord(`,"seen":{"at":"2026-11-21T19:10:00Z","sourceIPs":` + list + `}`),
		"encoding/json": validRecord(`,"seen":{"at":"2026-11-21T19:10:00Z","source\u0049Ps":` + list + `}`),
	} {
		value := []byte(record)
		var err error
		allocated := testing.AllocsPerRun(1, func() { _, err = decodeRecord(value, now) })
		require.EqualError(t, err, "fleet: record with a value over its bound: seen.sourceIPs", name)
		// A million strings would be a million allocations at least on
		// encoding/json's path, and a 16 MiB slice on the fast one.
		require.Less(t, allocated, 1000.0, name)
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		before := ms.TotalAlloc
		_, _ = decodeRecord(value, now)
		runtime.ReadMemStats(&ms)
		// encoding/json's decoder buffers the record, doubling as it
		// reads: up to three times its size, where a million strings
		// held would be over five.
		require.Less(t, ms.TotalAlloc-before, 3*uint64(len(value)), name+": bytes allocated, against the record's own size")
	}
}

// A removedRelease must be a release as the forwarder writes it, as on the
// webhook and Kafka paths; otherwise the record still counts, without it,
// and says why.
func TestFleetRemovedReleaseIsValidated(t *testing.T) {
	now := time.Date(2026, 11, 21, 19, 30, 0, 0, time.UTC)
	for _, tc := range []struct {
		value, want, dropped string
	}{
		{"1.37", "1.37", ""},
		{"2.0", "2.0", ""},
		{"banana", "", reasonBadRemovedRelease},
		{"1.", "", reasonBadRemovedRelease},
		{"x", "", reasonBadRemovedRelease},
		{"v1.37", "", reasonBadRemovedRelease},
		{"1.37.2", "", reasonBadRemovedRelease},
		{"01.37", "", reasonBadRemovedRelease},
	} {
		t.Run(tc.value, func(t *testing.T) {
			got, dropped, err := decodeCounted([]byte(validRecord(`,"removedRelease":"`+tc.value+`"`)), now)
			require.NoError(t, err)
			require.Equal(t, tc.want, got.RemovedRelease)
			require.Equal(t, tc.dropped, dropped)
			require.Equal(t, "endpoints.v1", got.Key.API, "the record still counts")
		})
	}
	_, dropped, err := decodeCounted([]byte(validRecord("")), now)
	require.NoError(t, err)
	require.Empty(t, dropped)
}
