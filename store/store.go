// Package store keeps Sunset's exact hourly request counts in badger.
//
// It records three things: counts (one uint64 per CountKey), dedupe marks (one
// per counted request, so a re-sent request is never counted twice) and a
// small metadata record per API. Field rules, which count requests that set
// a deprecated field, have counts and metadata of their own kind, in the
// same layouts (fieldrule.go). A request's mark and its count are always
// written in the same badger transaction, which is what makes counting exact
// across crashes and retries. Everything expires after the retention period
// through badger's TTL; Maintain deletes what expired, so that compactions
// free its space.
//
// Before badger opens a directory the store checks it for damage (check.go),
// and it stops writing while the filesystem is short of the room badger
// needs (space.go).
//
// What a sender can make it keep is bounded: every part of every key has a
// bound (bounds.go), and a request with a longer part is skipped alone,
// never failing the others of its commit; long IDs are digested. An API
// keeps at most MaxClients clients per apiserver node and hour, and counts
// the requests of further clients under OtherClient; likewise MaxClusters
// clusters and MaxNodes apiservers per cluster (topology.go). Totals stay
// exact.
//
// A request is identified by its cluster and its ID; the store does not
// know what the ID is made of. The directory records the version of its
// layout (schema.go), so that marks written before the ID changed are
// still found.
//
// The store knows nothing about audit events, HTTP or Kafka: callers hand it
// Requests that are already classified.
package store

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	badger "github.com/dgraph-io/badger/v4"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"
)

// DefaultRetention is how long counts and dedupe marks are kept when Options
// leaves Retention zero.
const DefaultRetention = 30 * 24 * time.Hour

// maxChunk bounds how many requests share one badger transaction, far below
// badger's transaction size limit for realistic key sizes.
const maxChunk = 4096

// Options configures Open. Its zero value, apart from Dir, is a safe default.
type Options struct {
	// Dir is the badger directory. It is created if missing.
	Dir string
	// Retention is how long an hour's counts and its dedupe marks live.
	// Zero means DefaultRetention.
	Retention time.Duration
	// NoSync skips the fsync on commit. Only benchmarks should set it: without
	// the fsync a power loss can lose acknowledged counts.
	NoSync bool
	// ReadOnly opens the directory without taking the write lock.
	ReadOnly bool
	// Logger receives the store's lines (component store) and badger's own
	// warnings and errors (component badger).
	Logger zerolog.Logger
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// MaxClients bounds the clients (username and user agent) of an API
	// per apiserver node and hour; requests of further clients are counted
	// under OtherClient. Zero means DefaultMaxClients.
	MaxClients int
	// MaxClusters bounds the clusters with counts within the retention
	// period, MaxNodes the apiservers of each; requests of further ones
	// are counted under OtherCluster or OtherNode. Zero means
	// DefaultMaxClusters and DefaultMaxNodes.
	MaxClusters, MaxNodes int
	// Merge says how what a request brings is merged into the records it
	// updates. Sunset's rules are aggregate.StoreMerge; the zero value
	// keeps what the store was given last.
	Merge Merge
	// Registerer receives the store's metrics (sunset_store_*); nil
	// registers none.
	Registerer prometheus.Registerer
}

// Merge holds the rules by which the store merges what a counted request
// brings (its removed release, who was behind it) into the records it
// updates. The store applies them and decides none of them.
type Merge struct {
	// RemovedRelease returns the removed release an API or field rule
	// keeps once a request of hour that announces given (maybe empty) is
	// added to its metadata, which holds stored and whose last hour so
	// far is last (the request's own hour for a new one). Nil keeps the
	// last non-empty release given.
	RemovedRelease func(stored string, last time.Time, given string, hour time.Time) string
	// Sighting merges one sighting into a client's workload record, empty
	// for a new one, and keeps it within whatever bounds it chooses. Nil
	// keeps the last sighting alone.
	Sighting func(w *Workload, s Sighting)
}

// withDefaults fills the rules m leaves nil.
func (m Merge) withDefaults() Merge {
	if m.RemovedRelease == nil {
		m.RemovedRelease = func(stored string, _ time.Time, given string, _ time.Time) string {
			if given != "" {
				return given
			}
			return stored
		}
	}
	if m.Sighting == nil {
		m.Sighting = lastSighting
	}
	return m
}

// Request is one audit request to count once.
type Request struct {
	// ID identifies the request within its cluster for deduplication.
	// One longer than MaxIDBytes is stored as its digest.
	ID string
	// LegacyID is the ID a store of schema 1 marked the request with, if
	// any: a request of an hour before the upgrade (schema.go) whose
	// legacy mark is stored is a duplicate, so that a batch committed
	// before the upgrade and retried after it still counts once.
	LegacyID       string
	Key            CountKey
	RemovedRelease string
	// Seen, if set, records the pod and addresses behind the request.
	Seen *Sighting
}

// Cursor is a position in an input, such as a file offset, stored in the
// same transaction as the counts read up to it: after a crash, reading
// resumes exactly where the committed counts end.
type Cursor struct {
	Name  string
	Value []byte
}

// APIInfo describes one API of one cluster that has counts.
type APIInfo struct {
	Cluster        string    `json:"-"`
	API            string    `json:"-"`
	RemovedRelease string    `json:"removedRelease,omitempty"`
	FirstHour      time.Time `json:"firstHour"`
	LastHour       time.Time `json:"lastHour"`
	// Nodes are the apiservers with requests to the API, each with the
	// last hour it had one, so that a reader lists every apiserver of the
	// retention period, idle or not, without scanning it. APIs leaves out
	// the expired ones.
	Nodes map[string]time.Time `json:"nodes,omitempty"`
}

// Store is an open badger database of counts. It is safe for concurrent use,
// but Apply calls are serialised: callers that want throughput batch many
// requests into one Apply (group commit).
type Store struct {
	db        *badger.DB
	dir       string
	reserve   int64
	refused   atomic.Uint64
	swept     atomic.Uint64
	log       zerolog.Logger
	retention time.Duration
	now       func() time.Time
	readOnly  bool
	noSync    bool
	merge     Merge
	metrics   *metrics

	applyMu sync.Mutex // serialises writers so read-modify-write never conflicts

	// legacyMarksUntil is the last hour that may have marks of schema 1.
	legacyMarksUntil time.Time
	// skipped logs skipped requests once per part.
	skipped skipLog
	// The caps on clusters and nodes, under applyMu.
	topology                      *topology
	foldedClusters, foldedNodes   atomic.Uint64
	foldClusterOnce, foldNodeOnce sync.Once

	metaMu sync.RWMutex
	meta   map[string]APIInfo // of APIs and field rules, by string(subject.metaKey)
	// legacy names, by the metadata key of a field rule, the API an older
	// version stored its records under, while they are still there.
	legacy map[string]string

	// The client cap. clients caches, by cellPrefix, the clients with
	// rows in each cell; only Apply and DeleteAPI use it, under applyMu.
	maxClients    int
	clients       map[string]map[ClientID]bool
	cachedClients int
	foldedClients atomic.Uint64
	foldOnce      sync.Once
}

// Open opens or creates the store in opts.Dir.
func Open(opts Options) (*Store, error) {
	if opts.Dir == "" {
		return nil, errors.New("store: a data directory is required")
	}
	if opts.Retention <= 0 {
		opts.Retention = DefaultRetention
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.MaxClients <= 0 {
		opts.MaxClients = DefaultMaxClients
	}
	if opts.MaxClusters <= 0 {
		opts.MaxClusters = DefaultMaxClusters
	}
	if opts.MaxNodes <= 0 {
		opts.MaxNodes = DefaultMaxNodes
	}
	// Badger would start empty over a directory whose MANIFEST is gone, and
	// delete the tables it does not list: look first.
	log := opts.Logger.With().Str("component", "store").Logger()
	removed, err := checkBeforeOpen(opts.Dir, opts.ReadOnly)
	if err != nil {
		return nil, err
	}
	for _, name := range removed {
		log.Warn().Str("file", name).Msg("removed an empty log that a crash left before badger sized it; it held nothing")
	}
	db, err := badger.Open(badgerOptions(opts.Dir, opts.Logger.With().Str("component", "badger").Logger()).
		WithSyncWrites(!opts.NoSync).
		WithReadOnly(opts.ReadOnly))
	if err != nil {
		if isLocked(err) {
			return nil, inUse(opts.Dir, err)
		}
		return nil, fmt.Errorf("store: opening badger in %s: %w (if the directory is damaged, run `sunset store verify --data-dir %s` and see \"Recovering a damaged store\" in docs/operations.md)", opts.Dir, err, opts.Dir)
	}
	if !opts.ReadOnly {
		if err := writeMarker(opts.Dir); err != nil {
			// Only the check of a lost MANIFEST needs it, and the next
			// start writes it again; a full disk must not keep Sunset down.
			log.Warn().Err(err).Msg("could not leave the store's marker; writing it at the next start")
		}
	}
	s := &Store{db: db, dir: opts.Dir, reserve: DiskReserve, retention: opts.Retention, now: opts.Now,
		readOnly: opts.ReadOnly, noSync: opts.NoSync, merge: opts.Merge.withDefaults(), meta: map[string]APIInfo{},
		maxClients: opts.MaxClients, clients: map[string]map[ClientID]bool{}, log: log,
		topology: newTopology(opts.MaxClusters, opts.MaxNodes)}
	if err := s.openSchema(); err != nil {
		_ = db.Close()
		return nil, err
	}
	if err := s.loadMeta(); err != nil {
		_ = db.Close()
		return nil, err
	}
	if err := s.adoptLegacyFieldRules(); err != nil {
		_ = db.Close()
		return nil, err
	}
	s.rebuildTopology()
	s.metrics = s.newMetrics(opts.Registerer)
	return s, nil
}

// badgerOptions are the options every open of a data directory uses.
func badgerOptions(dir string, log zerolog.Logger) badger.Options {
	return badger.DefaultOptions(dir).
		WithLogger(badgerLogger{log}).
		WithMetricsEnabled(false).
		WithMemTableSize(memTableSize).
		WithNumMemtables(numMemtables).
		WithValueLogFileSize(valueLogFileSize)
}

func isLocked(err error) bool {
	return strings.Contains(err.Error(), "Cannot acquire directory lock")
}

func inUse(dir string, err error) error { return &InUseError{Dir: dir, Err: err} }

// InUseError is the error of opening a data directory that another Sunset
// process holds.
type InUseError struct {
	Dir string
	Err error
}

func (e *InUseError) Error() string {
	return fmt.Sprintf("store: %s is in use by another Sunset process (badger holds its lock): %v", e.Dir, e.Err)
}

func (e *InUseError) Unwrap() error { return e.Err }

// Close flushes and closes badger.
func (s *Store) Close() error {
	return s.db.Close()
}

// Size returns the bytes badger uses on disk: its LSM tree and value log.
func (s *Store) Size() (lsm, vlog int64) { return s.db.Size() }

// Retention returns how long counts are kept.
func (s *Store) Retention() time.Duration { return s.retention }

// loadMeta reads the metadata of every API and field rule.
func (s *Store) loadMeta() error {
	return s.db.View(func(txn *badger.Txn) error {
		for _, prefix := range []byte{prefixMeta, prefixFieldRuleMeta} {
			if err := s.loadMetaOf(txn, prefix); err != nil {
				return err
			}
		}
		return nil
	})
}

func (s *Store) loadMetaOf(txn *badger.Txn, prefix byte) error {
	what := "API"
	if prefix == prefixFieldRuleMeta {
		what = "field rule"
	}
	it := txn.NewIterator(badger.IteratorOptions{Prefix: []byte{prefix}, PrefetchValues: true})
	defer it.Close()
	for it.Rewind(); it.Valid(); it.Next() {
		item := it.Item()
		cluster, name, err := decodeMetaKey(item.Key())
		if err != nil {
			return fmt.Errorf("store: reading %s metadata: %w", what, err)
		}
		var info APIInfo
		if err := item.Value(func(v []byte) error { return json.Unmarshal(v, &info) }); err != nil {
			return fmt.Errorf("store: reading %s metadata of %s: %w", what, name, err)
		}
		info.Cluster, info.API = cluster, name
		s.meta[string(item.KeyCopy(nil))] = info
	}
	return nil
}

// expiresAt is when badger may drop records of the given hour.
func (s *Store) expiresAt(hour time.Time) uint64 {
	return uint64(hour.Add(s.retention + time.Hour).Unix())
}

// Expired reports whether counts of the given hour are already past retention,
// so a request from that hour can no longer be counted (or deduplicated).
func (s *Store) Expired(hour time.Time) bool {
	return int64(s.expiresAt(hour)) <= s.now().Unix()
}

// Apply counts each request whose ID has not been counted before in its
// cluster, and reports for each request whether it was a duplicate. Marks,
// counts and metadata of a request are committed in one transaction and
// fsynced before Apply returns, so a nil error means everything is durable.
// Cursors are written in the transaction of the last requests, so a cursor
// is never ahead of the counts. Requests from an expired hour must be
// filtered out by the caller. A request with a part of its key over its
// bound is skipped (reported as not a duplicate; Commit tells it apart).
// Below the disk reserve it writes nothing and returns an error that
// matches ErrNoSpace.
func (s *Store) Apply(reqs []Request, cursors ...Cursor) ([]bool, error) {
	d, err := s.commit(Batch{Requests: reqs, Cursors: cursors})
	return d.Requests, err
}

// Batch is what one Commit writes.
type Batch struct {
	// Admission are admission webhook counts (see ApplyAdmission).
	Admission []AdmissionRequest
	// Requests count against APIs, FieldRules against field rules. Their
	// IDs share one space of dedupe marks per cluster.
	Requests   []Request
	FieldRules []FieldRuleRequest
	// Cursors are written with the last requests.
	Cursors []Cursor
}

// Duplicates says, request by request, which requests of a Batch had been
// counted before, and which were skipped.
type Duplicates struct {
	Admission, Requests, FieldRules []bool
	// Skipped says, for the same requests, why one was left out, neither
	// counted nor a duplicate; empty for the others. Nil when none was.
	Skipped *Skipped
}

// Skipped says why requests of a Batch were left out, in the layout of
// Duplicates.
type Skipped struct {
	Admission, Requests, FieldRules []Skip
}

// Commit is one group commit, timed and counted in the store's metrics:
// the admission counts as ApplyAdmission commits them, then the requests
// as Apply commits them, every request once, durable when it returns, with
// the cursors in the last transaction, so that a cursor is never ahead of
// either. A non-nil error means nothing may be assumed committed.
func (s *Store) Commit(b Batch) (Duplicates, error) {
	start := time.Now()
	d, err := s.commit(b)
	s.metrics.commitDuration.Observe(time.Since(start).Seconds())
	if err != nil {
		s.metrics.commitErrors.Inc()
	}
	return d, err
}

func (s *Store) commit(b Batch) (Duplicates, error) {
	if s.readOnly {
		return Duplicates{}, errors.New("store: opened read-only")
	}
	var out Duplicates
	if len(b.Admission) > 0 {
		var err error
		var skipped []Skip
		if out.Admission, skipped, err = s.applyAdmission(b.Admission); err != nil {
			return Duplicates{}, err
		}
		if skipped != nil {
			out.Skipped = &Skipped{Admission: skipped}
		}
	}
	n := len(b.Requests) + len(b.FieldRules)
	entries := make([]entry, 0, n)
	// at is the index in requests, then field rules, of each entry.
	at := make([]int, 0, n)
	var skipped []Skip
	add := func(i int, sub *subject, r Request) {
		if part, length := tooLong(sub, r.Key); part != "" {
			if skipped == nil {
				skipped = make([]Skip, n)
			}
			skipped[i] = SkipTooLong
			what := "API"
			if sub == fieldRuleSubject {
				what = "field rule"
			}
			s.logSkip(what, part, length)
			return
		}
		entries = append(entries, entry{sub, r})
		at = append(at, i)
	}
	for i, r := range b.Requests {
		add(i, apiSubject, r)
	}
	for i, r := range b.FieldRules {
		add(len(b.Requests)+i, fieldRuleSubject, r.request())
	}
	s.applyMu.Lock()
	defer s.applyMu.Unlock()
	dup := make([]bool, len(entries))
	if err := s.apply(entries, dup, b.Cursors); err != nil {
		return Duplicates{}, err
	}
	all := make([]bool, n)
	for j, i := range at {
		all[i] = dup[j]
	}
	out.Requests, out.FieldRules = all[:len(b.Requests)], all[len(b.Requests):]
	if skipped != nil {
		if out.Skipped == nil {
			out.Skipped = &Skipped{}
		}
		out.Skipped.Requests, out.Skipped.FieldRules = skipped[:len(b.Requests)], skipped[len(b.Requests):]
	}
	return out, nil
}

// entry is one request to count against its subject. For a field rule,
// Key.API holds the rule's name.
type entry struct {
	sub *subject
	Request
}

// apply commits entries in chunks and cursors with the last; the caller
// holds applyMu.
func (s *Store) apply(entries []entry, dup []bool, cursors []Cursor) error {
	if len(entries) == 0 && len(cursors) > 0 {
		if err := s.guardSpace(); err != nil {
			return err
		}
		return s.spaceError(s.applyChunk(nil, nil, cursors))
	}
	return inChunks(len(entries), func(lo, hi int) error {
		var last []Cursor
		if hi == len(entries) {
			last = cursors
		}
		// Each chunk is its own transaction: check before each, so that
		// no badger write starts below the reserve.
		if err := s.guardSpace(); err != nil {
			return err
		}
		return s.spaceError(s.applyChunk(entries[lo:hi], dup[lo:hi], last))
	})
}

// inChunks calls apply on consecutive ranges of n items, each in its own
// transaction: at most maxChunk, halved while badger finds the transaction
// too big.
func inChunks(n int, apply func(lo, hi int) error) error {
	return chunked(n, maxChunk, apply)
}

// chunked is inChunks with chunks of at most limit items.
func chunked(n, limit int, apply func(lo, hi int) error) error {
	for start := 0; start < n; {
		size := min(limit, n-start)
		for {
			err := apply(start, start+size)
			if errors.Is(err, badger.ErrTxnTooBig) && size > 1 {
				size /= 2
				continue
			}
			if err != nil {
				return err
			}
			break
		}
		start += size
	}
	return nil
}

// hasMark reports whether the mark mk is stored; a nil mk is not.
func hasMark(txn *badger.Txn, mk []byte) (bool, error) {
	if mk == nil {
		return false, nil
	}
	_, err := txn.Get(mk)
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, badger.ErrKeyNotFound):
		return false, nil
	}
	return false, fmt.Errorf("store: reading dedupe mark: %w", err)
}

// isDuplicate reports whether the dedupe mark mk is already in the batch
// (seen) or in the store, and adds it to seen otherwise.
func isDuplicate(txn *badger.Txn, mk []byte, seen map[string]struct{}) (bool, error) {
	if _, ok := seen[string(mk)]; ok {
		return true, nil
	}
	_, err := txn.Get(mk)
	switch {
	case err == nil:
		return true, nil
	case !errors.Is(err, badger.ErrKeyNotFound):
		return false, fmt.Errorf("store: reading dedupe mark: %w", err)
	}
	seen[string(mk)] = struct{}{}
	return false, nil
}

func (s *Store) applyChunk(entries []entry, dup []bool, cursors []Cursor) error {
	txn := s.db.NewTransaction(true)
	defer txn.Discard()

	deltas := map[string]uint64{}
	var order []string
	expiry := map[string]uint64{}
	metaUpdates := map[string]APIInfo{}
	seen := map[string]struct{}{}
	cc := newClientCap(s)
	defer cc.close()
	s.topology.prune(s)
	tc := newTopologyCap(s.topology)
	var capped []entry // entries with capped keys, copied once one changes
	for i, e := range entries {
		mk := encodeMarkKey(prefixMark, e.Key.Cluster, e.ID)
		d, err := isDuplicate(txn, mk, seen)
		if err != nil {
			return err
		}
		if !d {
			if d, err = hasMark(txn, s.legacyMark(prefixMark, e.Key.Cluster, e.LegacyID, e.Key.Hour)); err != nil {
				return err
			}
		}
		if dup[i] = d; d {
			continue
		}
		k := tc.key(e.Key)
		if k, err = cc.key(e.sub, k); err != nil {
			return err
		}
		if k != e.Key {
			// The caller's requests stay as they were. A folded request
			// keeps no sighting: the workload of "other" means nothing.
			if capped == nil {
				capped = slices.Clone(entries)
			}
			capped[i].Key = k
			if k.Username != e.Key.Username || k.UserAgent != e.Key.UserAgent {
				capped[i].Seen = nil
			}
			e = capped[i]
		}
		exp := s.expiresAt(e.Key.Hour)
		if err := setEntry(txn, expiringEntry(mk, nil, exp)); err != nil {
			return err
		}
		ck := string(e.sub.countKey(e.Key))
		if _, ok := deltas[ck]; !ok {
			order = append(order, ck)
		}
		deltas[ck]++
		expiry[ck] = exp
		s.noteMeta(metaUpdates, e)
	}
	for _, ck := range order {
		key := []byte(ck)
		var current uint64
		item, err := txn.Get(key)
		switch {
		case err == nil:
			if current, err = countValue(item); err != nil {
				return err
			}
		case !errors.Is(err, badger.ErrKeyNotFound):
			return fmt.Errorf("store: reading count: %w", err)
		}
		val := binary.BigEndian.AppendUint64(nil, current+deltas[ck])
		if err := setEntry(txn, expiringEntry(key, val, expiry[ck])); err != nil {
			return err
		}
	}
	for mk, info := range metaUpdates {
		val, err := json.Marshal(info)
		if err != nil {
			return err
		}
		if err := setEntry(txn, expiringEntry([]byte(mk), val, s.expiresAt(info.LastHour))); err != nil {
			return err
		}
	}
	if capped != nil {
		entries = capped
	}
	if err := s.applySightings(txn, entries, dup); err != nil {
		return err
	}
	for _, c := range cursors {
		if err := setEntry(txn, badger.NewEntry(encodeCursorKey(c.Name), c.Value)); err != nil {
			return err
		}
	}
	if err := txn.Commit(); err != nil {
		return fmt.Errorf("store: committing: %w", err)
	}
	cc.publish()
	s.metaMu.Lock()
	for mk, info := range metaUpdates {
		s.meta[mk] = info
	}
	s.metaMu.Unlock()
	for _, info := range metaUpdates {
		for node, last := range info.Nodes {
			s.topology.note(info.Cluster, node, last)
		}
	}
	s.publishFolds(tc)
	return nil
}

// countValue reads the value of a count record.
func countValue(item *badger.Item) (uint64, error) {
	var n uint64
	err := item.Value(func(v []byte) error {
		if len(v) != 8 {
			return fmt.Errorf("store: count value of %d bytes", len(v))
		}
		n = binary.BigEndian.Uint64(v)
		return nil
	})
	return n, err
}

// noteMeta records in updates how e changes its subject's metadata, if at
// all.
func (s *Store) noteMeta(updates map[string]APIInfo, e entry) {
	r := e.Request
	mk := string(e.sub.metaKey(r.Key.Cluster, r.Key.API))
	info, ok := updates[mk]
	if !ok {
		s.metaMu.RLock()
		info, ok = s.meta[mk]
		s.metaMu.RUnlock()
		if !ok {
			info = APIInfo{Cluster: r.Key.Cluster, API: r.Key.API, FirstHour: r.Key.Hour, LastHour: r.Key.Hour}
		}
	}
	changed := !ok
	if rel := s.merge.RemovedRelease(info.RemovedRelease, info.LastHour, r.RemovedRelease, r.Key.Hour); rel != info.RemovedRelease {
		info.RemovedRelease, changed = rel, true
	}
	if r.Key.Hour.After(info.LastHour) {
		info.LastHour, changed = r.Key.Hour, true
	}
	if r.Key.Hour.Before(info.FirstHour) {
		info.FirstHour, changed = r.Key.Hour, true
	}
	if last, ok := info.Nodes[r.Key.Node]; !ok || r.Key.Hour.After(last) {
		// The map is shared with s.meta until the commit publishes the
		// update: write to a copy.
		nodes := maps.Clone(info.Nodes)
		if nodes == nil {
			nodes = map[string]time.Time{}
		}
		nodes[r.Key.Node] = r.Key.Hour
		info.Nodes, changed = nodes, true
	}
	if changed {
		updates[mk] = info
	}
}

// Cursor reads a committed cursor.
func (s *Store) Cursor(name string) (value []byte, ok bool, err error) {
	err = s.db.View(func(txn *badger.Txn) error {
		item, err := txn.Get(encodeCursorKey(name))
		if errors.Is(err, badger.ErrKeyNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		value, err = item.ValueCopy(nil)
		ok = err == nil
		return err
	})
	return value, ok, err
}

// Seen reports, for each ID, whether a request with that ID was already
// counted in the cluster. It only reads: dry runs use it.
func (s *Store) Seen(cluster string, ids []string) ([]bool, error) {
	return s.seen(ids, func(id string) []byte { return encodeMarkKey(prefixMark, cluster, id) })
}

// seen reports, for each ID, whether its dedupe mark is in the store.
func (s *Store) seen(ids []string, markKey func(id string) []byte) ([]bool, error) {
	out := make([]bool, len(ids))
	err := s.db.View(func(txn *badger.Txn) error {
		for i, id := range ids {
			_, err := txn.Get(markKey(id))
			switch {
			case err == nil:
				out[i] = true
			case !errors.Is(err, badger.ErrKeyNotFound):
				return fmt.Errorf("store: reading dedupe mark: %w", err)
			}
		}
		return nil
	})
	return out, err
}

// APIs lists the APIs that have unexpired counts, sorted by cluster and name.
func (s *Store) APIs() []APIInfo { return s.infos(prefixMeta) }

// infos lists the unexpired metadata of one subject, sorted by name and
// cluster.
func (s *Store) infos(metaPrefix byte) []APIInfo {
	s.metaMu.RLock()
	out := make([]APIInfo, 0, len(s.meta))
	for mk, info := range s.meta {
		if mk[0] != metaPrefix || s.Expired(info.LastHour) {
			continue
		}
		info.Nodes = maps.Clone(info.Nodes)
		maps.DeleteFunc(info.Nodes, func(_ string, last time.Time) bool { return s.Expired(last) })
		out = append(out, info)
	}
	s.metaMu.RUnlock()
	slices.SortFunc(out, func(a, b APIInfo) int {
		if c := strings.Compare(a.API, b.API); c != 0 {
			return c
		}
		return strings.Compare(a.Cluster, b.Cluster)
	})
	return out
}

// ScanCounts calls fn for every count of one API in one cluster whose hour is
// in [from, to], in key order (hour first). The strings of the keys fn gets
// are shared between keys: equal values are one string.
func (s *Store) ScanCounts(cluster, api string, from, to time.Time, fn func(CountKey, uint64) error) error {
	return s.scanCounts(apiSubject.countPrefix(cluster, api), cluster, api, from, to, fn)
}

// scanCounts is ScanCounts over the counts under prefix, those of one
// subject, named name, in one cluster.
func (s *Store) scanCounts(prefix []byte, cluster, name string, from, to time.Time, fn func(CountKey, uint64) error) error {
	in := newInterner()
	var buf [8]byte
	return s.scanHours(prefix, from, to, func(item *badger.Item) error {
		k := CountKey{Cluster: cluster, API: name}
		if err := in.decodeCountKeyAfter(item.Key()[len(prefix):], &k); err != nil {
			return err
		}
		v, err := item.ValueCopy(buf[:0])
		if err != nil {
			return err
		}
		if len(v) != 8 {
			return errCorruptKey
		}
		return fn(k, binary.BigEndian.Uint64(v))
	})
}

// scanHours calls fn, in key order, for every record under prefix whose key
// continues with an hour in [from, to].
func (s *Store) scanHours(prefix []byte, from, to time.Time, fn func(*badger.Item) error) error {
	if from.Before(time.Unix(0, 0)) {
		// Hours are stored as unsigned seconds; nothing is before 1970.
		from = time.Unix(0, 0)
	}
	start := appendHour(slices.Clone(prefix), from.Truncate(time.Hour))
	end := appendHour(slices.Clone(prefix), to.Truncate(time.Hour).Add(time.Hour))
	return s.db.View(func(txn *badger.Txn) error {
		// No value prefetch: it starts a goroutine per item, and every
		// value here is a few bytes that live in the LSM tree beside its key.
		it := txn.NewIterator(badger.IteratorOptions{Prefix: prefix})
		defer it.Close()
		for it.Seek(start); it.Valid(); it.Next() {
			item := it.Item()
			if string(item.Key()) >= string(end) {
				return nil
			}
			if err := fn(item); err != nil {
				return err
			}
		}
		return nil
	})
}

func expiringEntry(key, val []byte, expiresAt uint64) *badger.Entry {
	e := badger.NewEntry(key, val)
	e.ExpiresAt = expiresAt
	return e
}

// DeleteAPI removes an API's counts, metadata and workload records in one
// cluster, and returns how many requests they held. Dedupe marks stay, so
// re-sent old events are still recognised. With dryRun nothing is removed.
func (s *Store) DeleteAPI(cluster, api string, dryRun bool) (uint64, error) {
	return s.deleteSubject(apiSubject, cluster, api, dryRun)
}

// deleteSubject is DeleteAPI for the subject sub, named name.
func (s *Store) deleteSubject(sub *subject, cluster, name string, dryRun bool) (uint64, error) {
	if s.readOnly {
		return 0, errors.New("store: opened read-only")
	}
	s.applyMu.Lock()
	defer s.applyMu.Unlock()
	var requests uint64
	var keys [][]byte
	err := s.db.View(func(txn *badger.Txn) error {
		for _, prefix := range [][]byte{sub.countPrefix(cluster, name), sub.workloadPrefix(cluster, name)} {
			it := txn.NewIterator(badger.IteratorOptions{Prefix: prefix, PrefetchValues: true})
			for it.Rewind(); it.Valid(); it.Next() {
				item := it.Item()
				keys = append(keys, item.KeyCopy(nil))
				if item.Key()[0] == sub.count {
					if err := item.Value(func(v []byte) error {
						if len(v) == 8 {
							requests += binary.BigEndian.Uint64(v)
						}
						return nil
					}); err != nil {
						it.Close()
						return err
					}
				}
			}
			it.Close()
		}
		return nil
	})
	if err != nil || dryRun {
		return requests, err
	}
	if err := s.guardSpace(); err != nil {
		return 0, err
	}
	metaKey := sub.metaKey(cluster, name)
	keys = append(keys, metaKey)
	wb := s.db.NewWriteBatch()
	defer wb.Cancel()
	for _, k := range keys {
		if err := wb.Delete(k); err != nil {
			return 0, fmt.Errorf("store: deleting %s: %w", name, err)
		}
	}
	if err := wb.Flush(); err != nil {
		return 0, s.spaceError(fmt.Errorf("store: deleting %s: %w", name, err))
	}
	if !s.noSync {
		if err := s.db.Sync(); err != nil {
			return 0, err
		}
	}
	s.metaMu.Lock()
	delete(s.meta, string(metaKey))
	s.metaMu.Unlock()
	// The deleted cells' clients are gone too.
	s.clients, s.cachedClients = map[string]map[ClientID]bool{}, 0
	s.rebuildTopology()
	return requests, nil
}
