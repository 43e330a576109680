package store

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	badger "github.com/dgraph-io/badger/v4"
	"github.com/rs/zerolog"
)

// Open opens or creates the store in opts.Dir.
func Open(opts Options) (*Store, error) { return open(opts, 0) }

// open is Open, stopping the migration of dedupe marks after
// migrateChunks transactions when positive.
func open(opts Options, migrateChunks int) (*Store, error) {
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
	if opts.MarkCacheBytes <= 0 {
		opts.MarkCacheBytes = DefaultMarkCacheBytes
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
		readOnly: opts.ReadOnly, noSync: opts.NoSync, merge: opts.Merge.withDefaults(), meta: map[string]APIInfo{}, versions: subjectVersions{by: map[string]Versions{}},
		maxClients: opts.MaxClients, clients: map[string]map[ClientID]bool{}, log: log,
		topology: newTopology(opts.MaxClusters, opts.MaxNodes), marks: newMarkSets(opts.MarkCacheBytes), migrateChunks: migrateChunks}
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

// BadgerOptions are the badger options Sunset opens a data directory
// with, logging nothing: for measuring badger alone beside Sunset.
func BadgerOptions(dir string) badger.Options { return badgerOptions(dir, zerolog.Nop()) }

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
