package aggregate

import (
	"github.com/kube-sunset/sunset/classify"
	"github.com/kube-sunset/sunset/countkey"
)

// Planned is what Ingest would do with one event.
type Planned struct {
	ID     string
	Result classify.Result
	// Key is where the request would be counted; zero unless counted.
	Key            countkey.CountKey
	RemovedRelease string
	// Admission is what the admission webhook counter would do: counted,
	// duplicate, or empty when the event has no webhook annotations to
	// count.
	Admission classify.Result
}

// Plan classifies events exactly as Ingest would, duplicates included, and
// stores nothing: the dry run of the Kubernetes dry-run KEP. Without a store
// (a client-side dry run) only duplicates within events are found.
func (a *Aggregator) Plan(origin classify.Origin, events []classify.Event) ([]Planned, error) {
	now := a.now()
	out := make([]Planned, len(events))
	var ids []string
	var counted []int
	for i := range events {
		a.countDropped(origin.Source, events[i].Dropped)
		req, res := a.cls.Request(origin, &events[i], now)
		out[i] = Planned{ID: events[i].ID, Result: res}
		if res == classify.ResultCounted {
			out[i].Key, out[i].RemovedRelease = req.Key, req.RemovedRelease
			ids = append(ids, req.ID)
			counted = append(counted, i)
		}
	}
	seen, err := a.seen(origin.Cluster, ids, a.store.Seen)
	if err != nil {
		return nil, err
	}
	for j, i := range counted {
		if seen[j] {
			out[i].Result, out[i].Key, out[i].RemovedRelease = classify.ResultDuplicate, countkey.CountKey{}, ""
		}
	}
	// The admission counter, on its own marks.
	ids, counted = ids[:0], counted[:0]
	for i := range events {
		if r, ok := a.cls.AdmissionRequest(origin, &events[i], now); ok {
			ids = append(ids, r.ID)
			counted = append(counted, i)
		}
	}
	if seen, err = a.seen(origin.Cluster, ids, a.store.AdmissionSeen); err != nil {
		return nil, err
	}
	for j, i := range counted {
		out[i].Admission = classify.ResultCounted
		if seen[j] {
			out[i].Admission = classify.ResultDuplicate
		}
	}
	return out, nil
}

// seen reports which ids are duplicates: already marked in the store, or
// earlier in ids.
func (a *Aggregator) seen(cluster string, ids []string, stored func(string, []string) ([]bool, error)) ([]bool, error) {
	seen := make([]bool, len(ids))
	if a.store != nil && len(ids) > 0 {
		var err error
		if seen, err = stored(cluster, ids); err != nil {
			return nil, err
		}
	}
	within := map[string]bool{}
	for j, id := range ids {
		if within[id] {
			seen[j] = true
		}
		within[id] = true
	}
	return seen, nil
}
