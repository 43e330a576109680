// Package store keeps Sunset's exact hourly request counts in badger.
//
// It records three things: counts (one uint64 per CountKey), dedupe marks (an
// 8-byte hash per counted request, in a segment per cluster, hour and commit,
// so a re-sent request is never counted twice: marks.go) and a small metadata
// record per API. Field rules, which count requests that set a deprecated
// field, have counts and metadata of their own kind, in the same layouts
// (fieldrule.go). A request's mark and its count are always written in the
// same badger transaction, which is what makes counting exact across crashes
// and retries. Everything expires after the retention period through
// badger's TTL; Maintain deletes what expired, so that compactions free its
// space.
//
// Before badger opens a directory the store checks it for damage (check.go),
// and it stops writing while the filesystem is short of the room badger
// needs (space.go).
//
// What a sender can make it keep is bounded: every part of every key has a
// bound (bounds.go), and so has what a request brings to a value (its
// removed release, its sighting); a request over one is skipped alone,
// never failing the others of its commit; long IDs are digested. No
// record over badger's own limits is ever handed to badger, which would
// fail its whole transaction: the request that would write it is skipped
// alone, as is one whose records badger or the store refuses for another
// reason that would refuse them again (a damaged record). An API
// keeps at most MaxClients clients per apiserver node and hour, and counts
// the requests of further clients under OtherClient; likewise MaxClusters
// clusters and MaxNodes apiservers per cluster (topology.go). Totals stay
// exact.
//
// A request is identified by its cluster and its ID. Of the ID the store
// reads only the time it may start with (classify.RequestID), which
// says the hour whose segments hold its mark. The directory records the
// version of its layout (schema.go), so that marks written before the ID
// or the marks changed are still found.
//
// The store knows nothing about audit events, HTTP or Kafka: callers hand it
// Requests that are already classified.
package store

import (
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	badger "github.com/dgraph-io/badger/v4"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"github.com/kube-sunset/sunset/countkey"
)

// DefaultRetention is how long counts and dedupe marks are kept when Options
// leaves Retention zero.
const DefaultRetention = 30 * 24 * time.Hour

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
	// MarkCacheBytes bounds the memory the dedupe marks of the hours
	// counted last take (marks.go): about 24 bytes a request. An hour's
	// marks that do not fit are read again from the store when it is
	// counted next. Zero means DefaultMarkCacheBytes.
	MarkCacheBytes int64
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
	Sighting func(w *Workload, s countkey.Sighting)
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
	// Versions are those of the API's counts in the cluster when APIs
	// was called.
	Versions Versions `json:"-"`
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
	compacted atomic.Uint64
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
	// marks keeps the sets of dedupe marks of the hours counted last;
	// marksMigrated is false until Open has moved every mark of schema 2
	// that a segment can hold into one (schema.go).
	marks         *markSets
	marksMigrated bool
	// migrateChunks, when positive, stops Open's migration of marks after
	// that many transactions, as a crash would: for tests.
	migrateChunks int
	// skipped logs skipped requests once per part.
	skipped skipLog
	// The caps on clusters and nodes, under applyMu.
	topology                      *topology
	foldedClusters, foldedNodes   atomic.Uint64
	foldClusterOnce, foldNodeOnce sync.Once

	metaMu sync.RWMutex
	meta   map[string]APIInfo // of APIs and field rules, by string(subject.metaKey)
	// versions are the versions of APIs and field rules, as meta keyed.
	versions subjectVersions
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

// Size returns the bytes badger uses on disk: its LSM tree (the .sst
// tables) and value log (the .vlog files). It reads the directory rather
// than badger's own Size, which answers 0 unless badger's metrics are on,
// and those publish to the process-global expvar.
func (s *Store) Size() (lsm, vlog int64) {
	entries, err := os.ReadDir(s.dir)
	if err != nil {
		return 0, 0
	}
	for _, e := range entries {
		info, err := e.Info()
		if err != nil || !info.Mode().IsRegular() {
			continue
		}
		switch filepath.Ext(e.Name()) {
		case ".sst":
			lsm += info.Size()
		case ".vlog":
			vlog += info.Size()
		}
	}
	return lsm, vlog
}

// Retention returns how long counts are kept.
func (s *Store) Retention() time.Duration { return s.retention }

// expiresAt is when badger may drop records of the given hour.
func (s *Store) expiresAt(hour time.Time) uint64 {
	return uint64(hour.Add(s.retention + time.Hour).Unix())
}

// Expired reports whether counts of the given hour are already past retention,
// so a request from that hour can no longer be counted (or deduplicated).
func (s *Store) Expired(hour time.Time) bool {
	return int64(s.expiresAt(hour)) <= s.now().Unix()
}
