package store

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"strings"
	"time"

	badger "github.com/dgraph-io/badger/v4"

	"github.com/kube-sunset/sunset/countkey"
)

// Before field rules had records of their own, a field rule's counts,
// metadata and workload records were stored as those of an API named
// legacyFieldRulePrefix and the rule's name. Open moves such records to the
// field rules' own (migrateFieldRules). A store that cannot write (opened
// read-only, or short of disk space) reads them where they are, beside the
// new ones, until an Open that can write moves them.
const legacyFieldRulePrefix = "field:"

// legacyRule is a field rule of one cluster with records stored the old
// way, and the metadata found there.
type legacyRule struct {
	cluster, rule string
	info          APIInfo
}

// takeLegacyFieldRules removes from s.meta the metadata of field rules
// stored as APIs, and returns them.
func (s *Store) takeLegacyFieldRules() []legacyRule {
	var out []legacyRule
	for mk, info := range s.meta {
		if mk[0] != prefixMeta {
			continue
		}
		if rule, ok := strings.CutPrefix(info.API, legacyFieldRulePrefix); ok {
			out = append(out, legacyRule{cluster: info.Cluster, rule: rule, info: info})
			delete(s.meta, mk)
		}
	}
	return out
}

// adoptLegacyFieldRules moves the records of field rules stored as APIs to
// their own kind, or, when the store cannot write, reads them in place.
func (s *Store) adoptLegacyFieldRules() error {
	rules := s.takeLegacyFieldRules()
	if len(rules) == 0 {
		return nil
	}
	if !s.readOnly {
		err := s.CheckSpace()
		if err == nil {
			if err := s.migrateFieldRules(rules); err != nil {
				return err
			}
			s.log.Info().Int("field_rules", len(rules)).Msg("moved the counts of field rules to records of their own")
			clear(s.meta)
			return s.loadMeta()
		}
		s.log.Warn().Err(err).Msg("field rules' counts stay where an older version wrote them until the data directory has room to move them")
	}
	s.legacy = map[string]string{}
	for _, r := range rules {
		mk := string(fieldRuleSubject.metaKey(r.cluster, r.rule))
		info := r.info
		info.API = r.rule
		if cur, ok := s.meta[mk]; ok {
			info = s.mergeInfo(cur, info)
		}
		s.meta[mk] = info
		s.legacy[mk] = legacyFieldRulePrefix + r.rule
	}
	return nil
}

// legacyName is the API name under which an older version stored the
// field rule's records, when they are still there.
func (s *Store) legacyName(cluster, rule string) (string, bool) {
	if s.legacy == nil {
		return "", false
	}
	s.metaMu.RLock()
	defer s.metaMu.RUnlock()
	name, ok := s.legacy[string(fieldRuleSubject.metaKey(cluster, rule))]
	return name, ok
}

// move is one record to move from an old key to a new one.
type move struct {
	from, to []byte
	// kind is the new key's prefix byte: what the record is.
	kind byte
}

// migrateFieldRules moves the records of field rules stored as APIs to
// their own kind. Each record moves in one transaction: written under its
// new key and deleted under its old. All of them move in one transaction
// when badger takes it, else in the largest ones it takes. Metadata moves
// last, so that a migration cut short is found again and finished by the
// next Open; one that was finished finds nothing to do.
func (s *Store) migrateFieldRules(rules []legacyRule) error {
	var moves, metas []move
	err := s.db.View(func(txn *badger.Txn) error {
		for _, r := range rules {
			old := legacyFieldRulePrefix + r.rule
			for _, p := range []struct{ from, to []byte }{
				{apiSubject.countPrefix(r.cluster, old), fieldRuleSubject.countPrefix(r.cluster, r.rule)},
				{apiSubject.workloadPrefix(r.cluster, old), fieldRuleSubject.workloadPrefix(r.cluster, r.rule)},
			} {
				it := txn.NewIterator(badger.IteratorOptions{Prefix: p.from})
				for it.Rewind(); it.Valid(); it.Next() {
					from := it.Item().KeyCopy(nil)
					to := append(append([]byte{}, p.to...), from[len(p.from):]...)
					moves = append(moves, move{from: from, to: to, kind: p.to[0]})
				}
				it.Close()
			}
			metas = append(metas, move{from: apiSubject.metaKey(r.cluster, old), to: fieldRuleSubject.metaKey(r.cluster, r.rule), kind: prefixFieldRuleMeta})
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("store: reading field rules' counts of an older version: %w", err)
	}
	moves = append(moves, metas...)
	size := len(moves)
	for start := 0; start < len(moves); {
		size = min(size, len(moves)-start)
		err := s.moveRecords(moves[start : start+size])
		if errors.Is(err, badger.ErrTxnTooBig) && size > 1 {
			size /= 2
			continue
		}
		if err != nil {
			return fmt.Errorf("store: moving field rules' counts of an older version: %w", s.spaceError(err))
		}
		start += size
	}
	return nil
}

// moveRecords moves records in one transaction. A record already under its
// new key (written by this version before an older one ran again) is
// merged with it.
func (s *Store) moveRecords(moves []move) error {
	txn := s.db.NewTransaction(true)
	defer txn.Discard()
	for _, m := range moves {
		item, err := txn.Get(m.from)
		if errors.Is(err, badger.ErrKeyNotFound) {
			continue
		}
		if err != nil {
			return err
		}
		val, err := item.ValueCopy(nil)
		if err != nil {
			return err
		}
		exp := item.ExpiresAt()
		if cur, err := txn.Get(m.to); err == nil {
			if val, exp, err = s.mergeRecord(m.kind, cur, val, exp); err != nil {
				return fmt.Errorf("merging a moved record of kind %#x: %w", m.kind, err)
			}
		} else if !errors.Is(err, badger.ErrKeyNotFound) {
			return err
		}
		if err := txn.SetEntry(expiringEntry(m.to, val, exp)); err != nil {
			return err
		}
		if err := txn.Delete(m.from); err != nil {
			return err
		}
	}
	return txn.Commit()
}

// mergeRecord merges val, a moved record of the given kind that expires at
// exp, into cur, the record already under the new key.
func (s *Store) mergeRecord(kind byte, cur *badger.Item, val []byte, exp uint64) ([]byte, uint64, error) {
	exp = max(exp, cur.ExpiresAt())
	switch kind {
	case prefixFieldRuleCount:
		n, err := countValue(cur)
		if err != nil {
			return nil, 0, err
		}
		if len(val) != 8 {
			return nil, 0, fmt.Errorf("count value of %d bytes", len(val))
		}
		return binary.BigEndian.AppendUint64(nil, n+binary.BigEndian.Uint64(val)), exp, nil
	case prefixFieldRuleMeta:
		var a, b APIInfo
		if err := cur.Value(func(v []byte) error { return json.Unmarshal(v, &a) }); err != nil {
			return nil, 0, err
		}
		if err := json.Unmarshal(val, &b); err != nil {
			return nil, 0, err
		}
		out, err := json.Marshal(s.mergeInfo(a, b))
		return out, exp, err
	default:
		var a, b Workload
		if err := cur.Value(func(v []byte) error { return json.Unmarshal(v, &a) }); err != nil {
			return nil, 0, err
		}
		if err := json.Unmarshal(val, &b); err != nil {
			return nil, 0, err
		}
		s.mergeWorkload(&a, b)
		out, err := json.Marshal(a)
		return out, exp, err
	}
}

// mergeInfo is the metadata of a subject whose requests are those of a and
// of b together.
func (s *Store) mergeInfo(a, b APIInfo) APIInfo {
	out := a
	out.RemovedRelease = s.merge.RemovedRelease(a.RemovedRelease, a.LastHour, b.RemovedRelease, b.LastHour)
	if b.FirstHour.Before(out.FirstHour) {
		out.FirstHour = b.FirstHour
	}
	if b.LastHour.After(out.LastHour) {
		out.LastHour = b.LastHour
	}
	out.Nodes = maps.Clone(a.Nodes)
	if out.Nodes == nil && len(b.Nodes) > 0 {
		out.Nodes = map[string]time.Time{}
	}
	for node, last := range b.Nodes {
		if cur, ok := out.Nodes[node]; !ok || last.After(cur) {
			out.Nodes[node] = last
		}
	}
	return out
}

// mergeWorkload adds what b saw to a, as sightings.
func (s *Store) mergeWorkload(a *Workload, b Workload) {
	for _, p := range b.Pods {
		s.merge.Sighting(a, countkey.Sighting{PodName: p.Name, PodNode: p.Node, At: p.LastSeen})
	}
	for _, ip := range b.SourceIPs {
		s.merge.Sighting(a, countkey.Sighting{SourceIPs: []string{ip.IP}, At: ip.LastSeen})
	}
	for _, c := range b.ImpersonatedBy {
		s.merge.Sighting(a, countkey.Sighting{ImpersonatedBy: c.Username, At: c.LastSeen})
	}
}
