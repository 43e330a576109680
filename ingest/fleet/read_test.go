package fleet

import (
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kube-sunset/sunset/catalog"
	"github.com/kube-sunset/sunset/countkey"
)

// Records as this version writes them take the fast read, and it gives
// encoding/json's result; what it declines, encoding/json decodes or
// refuses with the same answer from decodeRecord.
func TestReadRecordAgreesWithEncodingJSON(t *testing.T) {
	full := countkey.Request{ID: "a", RemovedRelease: "1.37", Key: countkey.CountKey{Cluster: "c", API: "endpoints.v1",
		Cell:    countkey.Cell{Hour: hour, Node: "n", Subresource: "status", Username: "u", UserAgent: "kubectl/v1.36", Verb: "get", DryRun: true},
		Removed: true},
		Seen: &countkey.Sighting{PodName: "p", PodNode: "w", SourceIPs: []string{"10.0.0.1"}, ImpersonatedBy: "alice", At: hour.Add(time.Minute)}}
	m, err := message(full)
	require.NoError(t, err)
	for _, tc := range []struct {
		value string
		fast  bool
	}{
		{string(m.Value), true},
		{`{"v":1,"cluster":"c","id":"a","api":"x","hour":"2026-11-21T19:00:00Z","node":"n","user":"","verb":"get","seen":null,"subresource":null}`, true},
		{`  {"v":1,"cluster":"c\u0041","id":"a","api":"x","hour":"2026-11-21T19:00:00Z","seen":{"sourceIPs":[]}} ` + "\n", true},
		{`{"V":1,"cluster":"c","id":"a","api":"x","hour":"2026-11-21T19:00:00Z"}`, false},           // folded key
		{`{"v":1,"v":1,"cluster":"c","id":"a","api":"x","hour":"2026-11-21T19:00:00Z"}`, false},     // repeated
		{`{"v":1.0,"cluster":"c","id":"a","api":"x","hour":"2026-11-21T19:00:00Z"}`, false},         // not an int
		{`{"v":1,"cluster":"c","id":"a","api":"x","hour":"2026-11-21T19:00:00Z","extra":1}`, false}, // unknown
		{`{"v":1,"cluster":"c","id":"a","api":"x","hour":"2026-11-21T19:00:00Z"}]`, false},          // trailing
		{`{"v":1,"cluster":"c","id":"a","api":"x","hour":"21 Nov 2026"}`, false},                    // bad time
		{`{"v":1,"cluster":"c","id":"a","api":"x","hour":"2026-11-21T19:00:00Z","seen":{"sourceIPs":[null]}}`, false},
	} {
		var fast record
		require.Equal(t, tc.fast, readRecord([]byte(tc.value), &fast), tc.value)
		slow, slowErr := decodeRecordJSON([]byte(tc.value))
		if tc.fast {
			require.NoError(t, slowErr, tc.value)
			require.Equal(t, slow, fast, tc.value)
		}
	}
}

// FuzzReadRecord holds the fast read to encoding/json: whatever it takes,
// encoding/json decodes without error to the same record.
func FuzzReadRecord(f *testing.F) {
	m, err := message(countkey.Request{ID: "a", Key: countkey.CountKey{Cluster: "c", API: "endpoints.v1",
		Cell: countkey.Cell{Hour: hour, Node: "n", Username: "u", Verb: "get"}},
		Seen: &countkey.Sighting{SourceIPs: []string{"10.0.0.1", "fd00::1"}, At: hour}})
	require.NoError(f, err)
	f.Add(m.Value)
	f.Add([]byte(`{"v":1,"cluster":"c","id":"a","api":"field:r","hour":"2026-11-21T19:00:00Z","dryRun":false,"removed":null}`))
	// Hostile lengths: long lists and values, a removed release that is
	// not one.
	many := func(entry string, n int) string { return strings.TrimSuffix(strings.Repeat(entry, n), ",") }
	for _, edit := range []string{
		`,"seen":{"at":"2026-11-21T19:10:00Z","sourceIPs":[` + many(`"",`, 5000) + `]}`,
		`,"seen":{"at":"2026-11-21T19:10:00Z","sourceIPs":[` + many(`"10.0.0.1",`, 50) + `,"x"]}`,
		`,"user":"` + strings.Repeat("u", 3000) + `"`,
		`,"userAgent":"` + strings.Repeat(`\u00e9`, 1000) + `"`,
		`,"removedRelease":"banana"`,
		`,"removedRelease":"` + strings.Repeat("1", 100) + `.37"`,
		`,"seen":{"at":"2026-11-21T19:10:00Z","pod":"` + strings.Repeat("p", 1000) + `","impersonatedBy":"` + strings.Repeat("i", 1000) + `"}`,
	} {
		f.Add([]byte(validRecord(edit)))
	}
	now := hour.Add(30 * time.Minute)
	f.Fuzz(func(t *testing.T, value []byte) {
		if req, _, err := decodeCounted(value, now); err == nil {
			checkRequestBounds(t, req)
		}
		var fast record
		if !readRecord(value, &fast) {
			return
		}
		slow, err := decodeRecordJSON(value)
		require.NoError(t, err, "%q", value)
		require.Equal(t, slow, fast, "%q", value)
	})
}

// checkRequestBounds fails t unless every value of a request a record
// gave is within the bound the store keeps, and what it kept is valid.
func checkRequestBounds(t *testing.T, req countkey.Request) {
	t.Helper()
	k := req.Key
	for _, f := range []struct {
		name  string
		value string
		max   int
	}{
		{"cluster", k.Cluster, countkey.MaxClusterBytes},
		{"node", k.Node, countkey.MaxNodeBytes},
		{"user", k.Username, countkey.MaxUsernameBytes},
		{"userAgent", k.UserAgent, countkey.MaxUserAgentBytes},
		{"verb", k.Verb, countkey.MaxVerbBytes},
		{"subresource", k.Subresource, countkey.MaxSubresourceBytes},
		{"removedRelease", req.RemovedRelease, countkey.MaxReleaseBytes},
	} {
		if len(f.value) > f.max {
			t.Fatalf("%s is %d bytes, over %d", f.name, len(f.value), f.max)
		}
	}
	if r := req.RemovedRelease; r != "" {
		if _, err := catalog.ParseRelease(r); err != nil {
			t.Fatalf("removedRelease %q is not a release", r)
		}
	}
	if s := req.Seen; s != nil {
		if len(s.SourceIPs) > countkey.MaxSourceIPs {
			t.Fatalf("%d sourceIPs, over %d", len(s.SourceIPs), countkey.MaxSourceIPs)
		}
		for _, ip := range s.SourceIPs {
			if _, err := netip.ParseAddr(ip); err != nil {
				t.Fatalf("sourceIPs holds %q", ip)
			}
		}
	}
}
