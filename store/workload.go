package store

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"

	badger "github.com/dgraph-io/badger/v4"

	"github.com/kube-sunset/sunset/countkey"
)

// prefixWorkload keys workload records.
const prefixWorkload byte = 0x05

// Workload is what was seen behind one client (username and user agent) of
// one API or field rule: pods, source addresses and impersonators, as
// Options.Merge keeps them.
type Workload struct {
	Pods           []PodSeen    `json:"pods,omitempty"`
	SourceIPs      []IPSeen     `json:"sourceIPs,omitempty"`
	ImpersonatedBy []CallerSeen `json:"impersonatedBy,omitempty"`
}

// CallerSeen is one user who impersonated the client, and when last.
type CallerSeen struct {
	Username string    `json:"username"`
	LastSeen time.Time `json:"lastSeen"`
}

// PodSeen is one pod and when it last called.
type PodSeen struct {
	Name     string    `json:"name"`
	Node     string    `json:"node,omitempty"`
	LastSeen time.Time `json:"lastSeen"`
}

// IPSeen is one source address and when it last called.
type IPSeen struct {
	IP       string    `json:"ip"`
	LastSeen time.Time `json:"lastSeen"`
}

// ClientID names a client of an API.
type ClientID struct{ Username, UserAgent string }

// workloadPrefix is the prefix of the workload records of one subject (an
// API or a field rule) in one cluster.
func (sub *subject) workloadPrefix(cluster, name string) []byte {
	b := []byte{sub.workload}
	b = appendString(b, cluster)
	return appendString(b, name)
}

// workloadKey is the key of the workload record of k's client; for a field
// rule, k.API holds the rule's name.
func (sub *subject) workloadKey(k countkey.CountKey) []byte {
	b := make([]byte, 0, 9+len(k.Cluster)+len(k.API)+len(k.Username)+len(k.UserAgent))
	b = append(b, sub.workload)
	b = appendString(b, k.Cluster)
	b = appendString(b, k.API)
	b = appendString(b, k.Username)
	return appendString(b, k.UserAgent)
}

// lastSighting makes w what s saw: the store's own rule, when Options.Merge
// gives none.
func lastSighting(w *Workload, s countkey.Sighting) {
	*w = Workload{}
	if s.PodName != "" {
		w.Pods = []PodSeen{{Name: s.PodName, Node: s.PodNode, LastSeen: s.At}}
	}
	for _, ip := range s.SourceIPs {
		w.SourceIPs = append(w.SourceIPs, IPSeen{IP: ip, LastSeen: s.At})
	}
	if s.ImpersonatedBy != "" {
		w.ImpersonatedBy = []CallerSeen{{Username: s.ImpersonatedBy, LastSeen: s.At}}
	}
}

// applySightings merges the sightings of counted requests into their
// workload records within txn.
//
// The records are found by client, not by key: a commit of a busy
// fleet holds many requests of each client, and encoding the key of each
// was most of what this cost beside badger.
func (s *Store) applySightings(txn *badger.Txn, entries []entry) error {
	type client struct {
		sub                                *subject
		cluster, name, username, userAgent string
	}
	type record struct {
		key     []byte
		w       Workload
		expires uint64
	}
	records := map[client]*record{}
	var order []*record
	for _, r := range entries {
		if r.out.Duplicate || r.Seen == nil {
			continue
		}
		c := client{r.sub, r.Key.Cluster, r.Key.API, r.Key.Username, r.Key.UserAgent}
		rec, ok := records[c]
		if !ok {
			rec = &record{key: r.sub.workloadKey(r.Key)}
			item, err := txn.Get(rec.key)
			switch {
			case err == nil:
				if err := item.Value(func(v []byte) error { return json.Unmarshal(v, &rec.w) }); err != nil {
					return damaged("workload record", err)
				}
			case !errors.Is(err, badger.ErrKeyNotFound):
				return fmt.Errorf("store: reading workload: %w", err)
			}
			records[c] = rec
			order = append(order, rec)
		}
		s.merge.Sighting(&rec.w, *r.Seen)
		rec.expires = max(rec.expires, s.expiresAt(r.Key.Hour))
	}
	for _, rec := range order {
		val, err := json.Marshal(&rec.w)
		if err != nil {
			return err
		}
		if err := setEntry(txn, expiringEntry(rec.key, val, rec.expires)); err != nil {
			return err
		}
	}
	return nil
}

// Workloads returns the workload records of every client of one API.
func (s *Store) Workloads(cluster, api string) (map[ClientID]Workload, error) {
	return s.workloads(apiSubject.workloadPrefix(cluster, api))
}

// workloads reads every workload record under prefix, those of one
// subject in one cluster.
func (s *Store) workloads(prefix []byte) (map[ClientID]Workload, error) {
	out := map[ClientID]Workload{}
	err := s.db.View(func(txn *badger.Txn) error {
		// No value prefetch: it starts a goroutine per record.
		it := txn.NewIterator(badger.IteratorOptions{Prefix: prefix})
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			rest := it.Item().Key()[len(prefix):]
			user, rest, err := readString(rest)
			if err != nil {
				return err
			}
			ua, _, err := readString(rest)
			if err != nil {
				return err
			}
			var w Workload
			if err := it.Item().Value(func(v []byte) error { return json.Unmarshal(v, &w) }); err != nil {
				return err
			}
			out[ClientID{user, ua}] = w
		}
		return nil
	})
	return out, err
}

// WorkloadsOf returns the workload records of the given clients of one
// API; clients without one are left out. A query shows a few clients of
// an API that may have thousands: it reads only theirs.
func (s *Store) WorkloadsOf(cluster, api string, clients []ClientID) (map[ClientID]Workload, error) {
	return s.workloadsOf(apiSubject, cluster, api, clients, nil)
}

// workloadsOf is WorkloadsOf for the subject sub, named name. Clients
// already in out are not read again.
func (s *Store) workloadsOf(sub *subject, cluster, name string, clients []ClientID, out map[ClientID]Workload) (map[ClientID]Workload, error) {
	if out == nil {
		out = make(map[ClientID]Workload, len(clients))
	}
	err := s.db.View(func(txn *badger.Txn) error {
		for _, c := range clients {
			if _, ok := out[c]; ok {
				continue
			}
			item, err := txn.Get(sub.workloadKey(countkey.CountKey{Cluster: cluster, API: name, Cell: countkey.Cell{Username: c.Username, UserAgent: c.UserAgent}}))
			if errors.Is(err, badger.ErrKeyNotFound) {
				continue
			}
			if err != nil {
				return fmt.Errorf("store: reading workload: %w", err)
			}
			var w Workload
			if err := item.Value(func(v []byte) error { return json.Unmarshal(v, &w) }); err != nil {
				return fmt.Errorf("store: reading workload: %w", err)
			}
			out[c] = w
		}
		return nil
	})
	return out, err
}
