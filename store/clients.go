package store

import (
	"fmt"

	badger "github.com/dgraph-io/badger/v4"

	"github.com/kube-sunset/sunset/countkey"
)

// DefaultMaxClients is how many clients (username and user agent) an API
// keeps per apiserver node and hour when Options leaves MaxClients zero:
// the byUser limit of OpenShift's APIRequestCount schema.
const DefaultMaxClients = 500

// OtherClient is the username and user agent that requests of the clients
// beyond MaxClients are counted under. Their counts stay exact; only who
// made them is lost.
const OtherClient = "other"

// maxCachedClients bounds the client sets kept in memory across commits;
// past it the cache starts over, and cells are read again from badger.
const maxCachedClients = 1 << 16

// cellPrefix appends to b the prefix of every count of one subject
// (an API or a field rule), hour and node: a cell of the client cap.
func cellPrefix(b []byte, sub *subject, k countkey.CountKey) []byte {
	b = append(b, sub.count)
	b = appendString(b, k.Cluster)
	b = appendString(b, k.API)
	b = appendHour(b, k.Hour)
	return appendString(b, k.Node)
}

// clientCap applies MaxClients to the requests of one commit. Sets read
// from badger or added by the commit are held apart until it succeeds.
type clientCap struct {
	s *Store
	// view reads cells committed before; not the commit's own
	// transaction, whose iterators sort all its pending writes each time.
	view    *badger.Txn
	pending map[string]map[ClientID]bool // clients the commit adds
	loaded  map[string]map[ClientID]bool // cells read from badger
	folded  int
	// cell holds the cell of the key asked for last: most of a commit's
	// requests fall in cells it has met, and are found without a string
	// of their own.
	cell []byte
}

func newClientCap(s *Store) *clientCap {
	return &clientCap{s: s, pending: map[string]map[ClientID]bool{}, loaded: map[string]map[ClientID]bool{}}
}

// close ends the read transaction, if one was needed.
func (c *clientCap) close() {
	if c.view != nil {
		c.view.Discard()
	}
}

// key returns k as it is counted: unchanged when its client already has
// rows in the cell or the cell has room, else with OtherClient.
func (c *clientCap) key(sub *subject, k countkey.CountKey) (countkey.CountKey, error) {
	if k.Username == OtherClient && k.UserAgent == OtherClient {
		return k, nil
	}
	c.cell = cellPrefix(c.cell[:0], sub, k)
	id := ClientID{Username: k.Username, UserAgent: k.UserAgent}
	known, ok := c.s.clients[string(c.cell)]
	if !ok {
		known, ok = c.loaded[string(c.cell)]
	}
	if !ok {
		var err error
		if known, err = c.load(sub, string(c.cell), k); err != nil {
			return k, err
		}
	}
	added := c.pending[string(c.cell)]
	if known[id] || added[id] {
		return k, nil
	}
	if len(known)+len(added) < c.s.maxClients {
		if added == nil {
			added = map[ClientID]bool{}
			c.pending[string(c.cell)] = added
		}
		added[id] = true
		return k, nil
	}
	c.folded++
	k.Username, k.UserAgent = OtherClient, OtherClient
	return k, nil
}

// load reads the clients of a cell from badger, as a pending read: it is
// published with the commit, so the cache never holds what a failed commit
// would have added. A cell the subject's metadata shows to be empty (a new
// API, node or hour, the usual case) is not read.
func (c *clientCap) load(sub *subject, cell string, k countkey.CountKey) (map[ClientID]bool, error) {
	set := map[ClientID]bool{}
	c.loaded[cell] = set
	c.s.metaMu.RLock()
	last, ok := c.s.meta[string(sub.metaKey(k.Cluster, k.API))].Nodes[k.Node]
	c.s.metaMu.RUnlock()
	if !ok || k.Hour.After(last) {
		return set, nil
	}
	if c.view == nil {
		c.view = c.s.db.NewTransaction(false)
	}
	it := c.view.NewIterator(badger.IteratorOptions{Prefix: []byte(cell)})
	defer it.Close()
	for it.Rewind(); it.Valid(); it.Next() {
		k, err := decodeCountKey(it.Item().Key())
		if err != nil {
			return nil, fmt.Errorf("store: reading the clients of a count: %w", err)
		}
		if k.Username != OtherClient || k.UserAgent != OtherClient {
			set[ClientID{Username: k.Username, UserAgent: k.UserAgent}] = true
		}
	}
	return set, nil
}

// publish adds what the committed transaction read and wrote to the cache.
func (c *clientCap) publish() {
	s := c.s
	for cell, set := range c.loaded {
		s.clients[cell] = set
		s.cachedClients += len(set)
	}
	for cell, added := range c.pending {
		set := s.clients[cell]
		if set == nil {
			set = map[ClientID]bool{}
			s.clients[cell] = set
		}
		for id := range added {
			set[id] = true
		}
		s.cachedClients += len(added)
	}
	if s.cachedClients > maxCachedClients {
		s.clients, s.cachedClients = map[string]map[ClientID]bool{}, 0
	}
	if c.folded > 0 {
		s.foldedClients.Add(uint64(c.folded))
		s.foldOnce.Do(func() {
			s.log.Warn().Int("max_clients", s.maxClients).
				Msg("an API has more clients than max-clients-per-node-hour in one node and hour; the others are counted as client \"other\" (counts stay exact). " +
					"A misbehaving or hostile sender can cause this; otherwise raise max-clients-per-node-hour")
		})
	}
}

// FoldedClients is how many requests were counted as OtherClient since
// the store was opened.
func (s *Store) FoldedClients() uint64 { return s.foldedClients.Load() }
