package store

import (
	"time"

	"github.com/kube-sunset/sunset/countkey"
)

// Field rules count requests that set a deprecated field. Their counts,
// metadata and workload records are a kind of their own, under their own
// prefix bytes, in the layouts of an API's: a field rule is never listed,
// scanned or deleted as an API, nor an API as a field rule.

// FieldRuleKey identifies one counted cell of a field rule: requests that
// set the rule's field in one cluster and UTC hour, served by one apiserver
// node, made by one client with one verb.
type FieldRuleKey struct {
	Cluster string
	Rule    string
	countkey.Cell
}

func fieldRuleKey(k countkey.CountKey) FieldRuleKey {
	return FieldRuleKey{Cluster: k.Cluster, Rule: k.API, Cell: k.Cell}
}

// FieldRuleInfo describes one field rule of one cluster that has counts.
type FieldRuleInfo struct {
	Cluster        string
	Rule           string
	RemovedRelease string
	FirstHour      time.Time
	LastHour       time.Time
	// Nodes are the apiservers that served requests the rule matched,
	// each with the last hour it had one, as in APIInfo.
	Nodes map[string]time.Time
	// Versions are as in APIInfo.
	Versions Versions
}

// FieldRules lists the field rules that have unexpired counts, sorted by
// rule and cluster.
func (s *Store) FieldRules() []FieldRuleInfo {
	infos := s.infos(prefixFieldRuleMeta)
	out := make([]FieldRuleInfo, len(infos))
	for i, info := range infos {
		out[i] = FieldRuleInfo{Cluster: info.Cluster, Rule: info.API, RemovedRelease: info.RemovedRelease,
			FirstHour: info.FirstHour, LastHour: info.LastHour, Nodes: info.Nodes, Versions: info.Versions}
	}
	return out
}

// ScanFieldRuleCounts calls fn for every count of one field rule in one
// cluster whose hour is in [from, to], as ScanCounts does for an API.
func (s *Store) ScanFieldRuleCounts(cluster, rule string, from, to time.Time, fn func(FieldRuleKey, uint64) error) error {
	each := func(k countkey.CountKey, n uint64) error { return fn(fieldRuleKey(k), n) }
	if err := s.scanCounts(fieldRuleSubject.countPrefix(cluster, rule), cluster, rule, from, to, each); err != nil {
		return err
	}
	if old, ok := s.legacyName(cluster, rule); ok {
		return s.scanCounts(apiSubject.countPrefix(cluster, old), cluster, rule, from, to, each)
	}
	return nil
}

// FieldRuleWorkloadsOf returns the workload records of the given clients of
// one field rule; clients without one are left out.
func (s *Store) FieldRuleWorkloadsOf(cluster, rule string, clients []ClientID) (map[ClientID]Workload, error) {
	out, err := s.workloadsOf(fieldRuleSubject, cluster, rule, clients, nil)
	if err != nil {
		return nil, err
	}
	if old, ok := s.legacyName(cluster, rule); ok {
		return s.workloadsOf(apiSubject, cluster, old, clients, out)
	}
	return out, nil
}

// DeleteFieldRule removes a field rule's counts, metadata and workload
// records in one cluster, as DeleteAPI does an API's.
func (s *Store) DeleteFieldRule(cluster, rule string, dryRun bool) (uint64, error) {
	n, err := s.deleteSubject(fieldRuleSubject, cluster, rule, dryRun)
	if err != nil {
		return n, err
	}
	if old, ok := s.legacyName(cluster, rule); ok {
		m, err := s.deleteSubject(apiSubject, cluster, old, dryRun)
		if err == nil && !dryRun {
			s.metaMu.Lock()
			delete(s.legacy, string(fieldRuleSubject.metaKey(cluster, rule)))
			s.metaMu.Unlock()
		}
		return n + m, err
	}
	return n, nil
}
