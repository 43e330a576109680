package store

import (
	"maps"
	"slices"
	"time"
)

// Versions tell a reader whether what it read of one API or field rule of
// one cluster still holds, so that a query can keep what it built from
// the hours that no longer change. Both grow, and never repeat in the
// process, even for an API deleted and counted again:
//   - Writes with every commit that counts a request of it, and with its
//     deletion;
//   - Past with every commit that counts a request of an hour before the
//     hour the commit ends in (a late, replayed or backfilled request),
//     and with its deletion.
//
// A reader that takes the versions (APIs, FieldRules) before it scans may
// keep what it read of the hours before the current one for as long as
// Past is the same, and all of it for as long as Writes is. The version
// moves after the commit lands: a commit that the scan missed always
// moves it.
type Versions struct {
	Writes, Past uint64
}

// subjectVersions are the versions of every API and field rule counted
// since Open, by metadata key, under Store.metaMu. Entries are never
// dropped: a version taken from a fresh sequence after a deletion could
// otherwise equal one a reader kept from before it.
type subjectVersions struct {
	seq uint64
	by  map[string]Versions
}

// touch notes, for a chunk being written, that it counts a request of the
// subject under metadata key mk from hour.
func touch(touched map[string]time.Time, mk string, hour time.Time) {
	if first, ok := touched[mk]; !ok || hour.Before(first) {
		touched[mk] = hour
	}
}

// written moves the versions of the subjects a committed chunk counted:
// Past too for those it counted a request of an hour before now's.
func (v *subjectVersions) written(touched map[string]time.Time, now time.Time) {
	current := now.UTC().Truncate(time.Hour)
	// In key order, so that a commit's versions are the same every time.
	for _, mk := range slices.Sorted(maps.Keys(touched)) {
		first := touched[mk]
		v.seq++
		ver := v.by[mk]
		ver.Writes = v.seq
		if first.Before(current) {
			ver.Past = v.seq
		}
		v.by[mk] = ver
	}
}

// deleted moves both versions of a deleted subject.
func (v *subjectVersions) deleted(mk string) {
	v.seq++
	v.by[mk] = Versions{Writes: v.seq, Past: v.seq}
}
