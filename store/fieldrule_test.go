package store

import (
	"fmt"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/stretchr/testify/require"

	"github.com/kube-sunset/sunset/countkey"
)

// fieldRuleRows lists the counts of one field rule as "hour node user
// verb: n".
func fieldRuleRows(t *testing.T, s *Store, cluster, rule string) map[FieldRuleKey]uint64 {
	t.Helper()
	out := map[FieldRuleKey]uint64{}
	require.NoError(t, s.ScanFieldRuleCounts(cluster, rule, hour19.Add(-24*time.Hour), hour19, func(k FieldRuleKey, n uint64) error {
		out[k] += n
		return nil
	}))
	return out
}

// Field rules' counts are their own kind: never an API, never mixed with
// one of the same name, deduplicated with the requests they came from,
// and reset on their own.
func TestFieldRuleCountsAreTheirOwnKind(t *testing.T) {
	s := openTest(t, t.TempDir(), hour19.Add(30*time.Minute))
	defer s.Close()
	api := countkey.CountKey{Cluster: "c", API: "services.v1", Cell: countkey.Cell{Hour: hour19, Node: "n1", Username: "alice", UserAgent: "kubectl", Verb: "create"}}
	rule := FieldRuleKey{Cluster: "c", Rule: "services.v1",
		Cell: countkey.Cell{Hour: hour19, Node: "n1", Username: "alice", UserAgent: "kubectl", Verb: "create"}}
	seen := &countkey.Sighting{PodName: "app-0", At: hour19}
	d, err := s.commitBatch(Batch{
		Requests: []Request{{ID: "a", Key: api, RemovedRelease: "1.40"}},
		FieldRules: []FieldRuleRequest{
			{ID: "a#field:services.v1", Key: rule, RemovedRelease: "1.22", Seen: seen},
			{ID: "b#field:services.v1", Key: rule, RemovedRelease: "1.22"},
			{ID: "a#field:services.v1", Key: rule, RemovedRelease: "1.22"},
		},
		Cursors: []countkey.Cursor{{Name: "file:x", Value: []byte("1")}},
	})
	require.NoError(t, err)
	require.Equal(t, Duplicates{Requests: []bool{false}, FieldRules: []bool{false, false, true}}, d)
	d, err = s.commitBatch(Batch{Requests: []Request{{ID: "a#field:services.v1", Key: api}}})
	require.NoError(t, err)
	require.Equal(t, []bool{true}, d.Requests, "one space of dedupe marks")

	// One commit counted the API and the rule, in the current hour: the
	// first step of the versions' sequence, in the order of their keys.
	require.Equal(t, []APIInfo{{Cluster: "c", API: "services.v1", RemovedRelease: "1.40", FirstHour: hour19, LastHour: hour19,
		Nodes: map[string]time.Time{"n1": hour19}, Versions: Versions{Writes: 1}}}, s.APIs())
	require.Equal(t, []FieldRuleInfo{{Cluster: "c", Rule: "services.v1", RemovedRelease: "1.22", FirstHour: hour19, LastHour: hour19,
		Nodes: map[string]time.Time{"n1": hour19}, Versions: Versions{Writes: 2}}}, s.FieldRules(), "the second step: its key sorts after the API's")
	require.Equal(t, map[FieldRuleKey]uint64{rule: 2}, fieldRuleRows(t, s, "c", "services.v1"))
	require.Equal(t, []string{"19 n1 alice create: 1"}, rows(t, s, "services.v1"))

	w, err := s.FieldRuleWorkloadsOf("c", "services.v1", []ClientID{{"alice", "kubectl"}})
	require.NoError(t, err)
	require.Equal(t, map[ClientID]Workload{{"alice", "kubectl"}: {Pods: []PodSeen{{Name: "app-0", LastSeen: hour19}}}}, w)
	w, err = s.WorkloadsOf("c", "services.v1", []ClientID{{"alice", "kubectl"}})
	require.NoError(t, err)
	require.Empty(t, w, "the API's clients are its own")

	n, err := s.DeleteFieldRule("c", "services.v1", false)
	require.NoError(t, err)
	require.Equal(t, uint64(2), n)
	require.Empty(t, s.FieldRules())
	require.Empty(t, fieldRuleRows(t, s, "c", "services.v1"))
	require.Len(t, s.APIs(), 1, "the API stays")
	require.Equal(t, map[byte]int{prefixCount: 1, prefixMark: 3, prefixMeta: 1, prefixCursor: 1}, keysByKind(t, s))
}

// The client cap applies to a field rule as to an API, cell by cell.
func TestFieldRuleClientCap(t *testing.T) {
	s, err := Open(Options{Dir: t.TempDir(), Logger: zerolog.Nop(), Now: func() time.Time { return hour19 }, MaxClients: 1})
	require.NoError(t, err)
	defer s.Close()
	k := FieldRuleKey{Cluster: "c", Rule: "r", Cell: countkey.Cell{Hour: hour19, Node: "n1", Username: "alice", Verb: "create"}}
	other := k
	other.Username = "bob"
	_, err = s.commitBatch(Batch{FieldRules: []FieldRuleRequest{{ID: "1", Key: k}, {ID: "2", Key: other}}})
	require.NoError(t, err)
	folded := k
	folded.Username, folded.UserAgent = OtherClient, OtherClient
	require.Equal(t, map[FieldRuleKey]uint64{k: 1, folded: 1}, fieldRuleRows(t, s, "c", "r"))
}

// Retention and Sweep treat a field rule's records as an API's.
func TestSweepDeletesExpiredFieldRuleRecords(t *testing.T) {
	c := &clock{t: nextWeek.Add(30 * time.Minute)}
	s, err := Open(Options{Dir: t.TempDir(), Retention: 24 * time.Hour, Logger: zerolog.Nop(), Now: c.now})
	require.NoError(t, err)
	defer s.Close()
	k := FieldRuleKey{Cluster: "c", Rule: "r", Cell: countkey.Cell{Hour: nextWeek, Node: "n1", Username: "alice", Verb: "create"}}
	_, err = s.commitBatch(Batch{FieldRules: []FieldRuleRequest{{ID: "1", Key: k, Seen: &countkey.Sighting{PodName: "p", At: nextWeek}}}})
	require.NoError(t, err)
	require.Equal(t, map[byte]int{prefixFieldRuleCount: 1, prefixMark: 1, prefixFieldRuleMeta: 1, prefixFieldRuleWorkload: 1}, keysByKind(t, s))
	require.Len(t, s.FieldRules(), 1)

	c.t = nextWeek.Add(26 * time.Hour)
	require.Empty(t, s.FieldRules(), "expired with its hour")
	n, err := s.Sweep()
	require.NoError(t, err)
	require.Equal(t, 4, n)
	require.Empty(t, keysByKind(t, s))
}

// writeLegacyFieldRule writes a field rule's match as versions before field
// rules had records of their own did: as a request to an API named
// "field:" and the rule's name.
func writeLegacyFieldRule(t *testing.T, s *Store, id, rule, user string, hour time.Time) {
	t.Helper()
	_, err := s.Apply([]Request{{ID: id + "#field:" + rule, RemovedRelease: "1.22",
		Key:  countkey.CountKey{Cluster: "c", API: "field:" + rule, Cell: countkey.Cell{Hour: hour, Node: "n1", Username: user, UserAgent: "kubectl", Verb: "create"}},
		Seen: &countkey.Sighting{PodName: "pod-" + user, At: hour}}})
	require.NoError(t, err)
}

// A data directory written before field rules had records of their own
// keeps their counts: the first Open moves them, in one transaction, and
// later Opens find nothing more to move. Dedupe marks are where they were.
func TestOpenMovesFieldRulesStoredAsAPIs(t *testing.T) {
	dir := t.TempDir()
	now := hour19.Add(30 * time.Minute)
	s := openTest(t, dir, now)
	writeLegacyFieldRule(t, s, "a", "service-topology-keys", "alice", hour19)
	writeLegacyFieldRule(t, s, "b", "service-topology-keys", "alice", hour19)
	writeLegacyFieldRule(t, s, "c", "service-topology-keys", "bob", hour19.Add(-time.Hour))
	_, err := s.Apply([]Request{{ID: "d", Key: countkey.CountKey{Cluster: "c", API: "services.v1", Cell: countkey.Cell{Hour: hour19, Node: "n1", Verb: "get"}}}})
	require.NoError(t, err)
	require.Equal(t, map[byte]int{prefixCount: 3, prefixMark: 4, prefixMeta: 2, prefixWorkload: 2}, keysByKind(t, s))
	require.NoError(t, s.Close())

	want := map[FieldRuleKey]uint64{
		{Cluster: "c", Rule: "service-topology-keys",
			Cell: countkey.Cell{Hour: hour19, Node: "n1", Username: "alice", UserAgent: "kubectl", Verb: "create"}}: 2,
		{Cluster: "c", Rule: "service-topology-keys",
			Cell: countkey.Cell{Hour: hour19.Add(-time.Hour), Node: "n1", Username: "bob", UserAgent: "kubectl", Verb: "create"}}: 1,
	}
	wantInfo := []FieldRuleInfo{{Cluster: "c", Rule: "service-topology-keys", RemovedRelease: "1.22", FirstHour: hour19.Add(-time.Hour), LastHour: hour19,
		Nodes: map[string]time.Time{"n1": hour19}}}
	for range 2 {
		s = openTest(t, dir, now)
		require.Equal(t, map[byte]int{prefixCount: 1, prefixMark: 4, prefixMeta: 1,
			prefixFieldRuleCount: 2, prefixFieldRuleMeta: 1, prefixFieldRuleWorkload: 2}, keysByKind(t, s))
		require.Equal(t, []string{"services.v1"}, apiNames(s.APIs()))
		require.Equal(t, wantInfo, s.FieldRules())
		require.Equal(t, want, fieldRuleRows(t, s, "c", "service-topology-keys"))
		w, err := s.FieldRuleWorkloadsOf("c", "service-topology-keys", []ClientID{{"alice", "kubectl"}, {"bob", "kubectl"}})
		require.NoError(t, err)
		require.Equal(t, map[ClientID]Workload{
			{"alice", "kubectl"}: {Pods: []PodSeen{{Name: "pod-alice", LastSeen: hour19}}},
			{"bob", "kubectl"}:   {Pods: []PodSeen{{Name: "pod-bob", LastSeen: hour19.Add(-time.Hour)}}},
		}, w)
		seen, err := s.Seen("c", []string{"a#field:service-topology-keys", "c#field:service-topology-keys"})
		require.NoError(t, err)
		require.Equal(t, []bool{true, true}, seen)
		require.NoError(t, s.Close())
	}
}

// A store that cannot move them reads the records of field rules stored as
// APIs where they are.
func TestReadOnlyReadsFieldRulesStoredAsAPIs(t *testing.T) {
	dir := t.TempDir()
	s := openTest(t, dir, hour19.Add(30*time.Minute))
	writeLegacyFieldRule(t, s, "a", "r", "alice", hour19)
	require.NoError(t, s.Close())

	ro, err := Open(Options{Dir: dir, ReadOnly: true, Logger: zerolog.Nop(), Now: func() time.Time { return hour19 }})
	require.NoError(t, err)
	defer ro.Close()
	require.Empty(t, ro.APIs())
	require.Equal(t, []FieldRuleInfo{{Cluster: "c", Rule: "r", RemovedRelease: "1.22", FirstHour: hour19, LastHour: hour19,
		Nodes: map[string]time.Time{"n1": hour19}}}, ro.FieldRules())
	require.Equal(t, map[FieldRuleKey]uint64{{Cluster: "c", Rule: "r",
		Cell: countkey.Cell{Hour: hour19, Node: "n1", Username: "alice", UserAgent: "kubectl", Verb: "create"}}: 1},
		fieldRuleRows(t, ro, "c", "r"))
	w, err := ro.FieldRuleWorkloadsOf("c", "r", []ClientID{{"alice", "kubectl"}})
	require.NoError(t, err)
	require.Len(t, w, 1)
}

// Records stored both ways (an older version ran again over a moved
// store) are merged when they move: counts add up, metadata and workload
// records merge by Options.Merge.
func TestOpenMergesFieldRulesStoredBothWays(t *testing.T) {
	dir := t.TempDir()
	now := hour19.Add(30 * time.Minute)
	merge := Merge{Sighting: func(w *Workload, s countkey.Sighting) {
		w.Pods = append(w.Pods, PodSeen{Name: s.PodName, LastSeen: s.At})
	}}
	open := func() *Store {
		s, err := Open(Options{Dir: dir, Logger: zerolog.Nop(), Now: func() time.Time { return now }, Merge: merge})
		require.NoError(t, err)
		return s
	}
	s := open()
	k := FieldRuleKey{Cluster: "c", Rule: "r", Cell: countkey.Cell{Hour: hour19, Node: "n1", Username: "alice", UserAgent: "kubectl", Verb: "create"}}
	_, err := s.commitBatch(Batch{FieldRules: []FieldRuleRequest{{ID: "x#field:r", Key: k, RemovedRelease: "1.22", Seen: &countkey.Sighting{PodName: "pod-0", At: hour19}}}})
	require.NoError(t, err)
	writeLegacyFieldRule(t, s, "a", "r", "alice", hour19)
	require.NoError(t, s.Close())

	s = open()
	defer s.Close()
	require.Equal(t, map[FieldRuleKey]uint64{k: 2}, fieldRuleRows(t, s, "c", "r"))
	require.Len(t, s.FieldRules(), 1)
	require.Empty(t, s.APIs())
	w, err := s.FieldRuleWorkloadsOf("c", "r", []ClientID{{"alice", "kubectl"}})
	require.NoError(t, err)
	require.Equal(t, []string{"pod-0", "pod-alice"}, podNames(w[ClientID{"alice", "kubectl"}]))
}

func apiNames(infos []APIInfo) []string {
	var out []string
	for _, i := range infos {
		out = append(out, i.API)
	}
	return out
}

func podNames(w Workload) []string {
	var out []string
	for _, p := range w.Pods {
		out = append(out, p.Name)
	}
	return out
}

// A migration too big for one badger transaction moves in several.
func TestOpenMovesManyFieldRuleRecords(t *testing.T) {
	dir := t.TempDir()
	now := hour19.Add(30 * time.Minute)
	s := openTest(t, dir, now)
	const hours, nodes, users = 10, 2, 500
	for h := range hours {
		var reqs []Request
		for n := range nodes {
			for u := range users {
				reqs = append(reqs, Request{ID: fmt.Sprintf("%d-%d-%d#field:r", h, n, u), Key: countkey.CountKey{Cluster: "c", API: "field:r",
					Cell: countkey.Cell{Hour: hour19.Add(-time.Duration(h) * time.Hour), Node: fmt.Sprintf("n%d", n),
						Username: fmt.Sprintf("user-%d", u), Verb: "create"}}})
			}
		}
		_, err := s.Apply(reqs)
		require.NoError(t, err)
	}
	require.NoError(t, s.Close())

	s = openTest(t, dir, now)
	defer s.Close()
	var total uint64
	require.NoError(t, s.ScanFieldRuleCounts("c", "r", hour19.Add(-hours*time.Hour), hour19, func(_ FieldRuleKey, n uint64) error {
		total += n
		return nil
	}))
	require.Equal(t, uint64(hours*nodes*users), total)
	require.Equal(t, map[byte]int{prefixMark: hours * nodes * users, prefixFieldRuleCount: hours * nodes * users, prefixFieldRuleMeta: 1}, keysByKind(t, s))
}
