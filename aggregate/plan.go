package aggregate

import "github.com/kube-sunset/sunset/store"

// Planned is what Ingest would do with one event.
type Planned struct {
	ID     string
	Result Result
	// Key is where the request would be counted; zero unless counted.
	Key            store.CountKey
	RemovedRelease string
}

// Plan classifies events exactly as Ingest would, duplicates included, and
// stores nothing: the dry run of the Kubernetes dry-run KEP. Without a store
// (a client-side dry run) only duplicates within events are found.
func (a *Aggregator) Plan(origin Origin, events []Event) ([]Planned, error) {
	now := a.now()
	out := make([]Planned, len(events))
	var ids []string
	var counted []int
	for i := range events {
		req, res := a.classify(origin, &events[i], now)
		out[i] = Planned{ID: events[i].ID, Result: res}
		if res == ResultCounted {
			out[i].Key, out[i].RemovedRelease = req.Key, req.RemovedRelease
			ids = append(ids, req.ID)
			counted = append(counted, i)
		}
	}
	seen := make([]bool, len(ids))
	if a.store != nil && len(ids) > 0 {
		var err error
		if seen, err = a.store.Seen(origin.Cluster, ids); err != nil {
			return nil, err
		}
	}
	within := map[string]bool{}
	for j, i := range counted {
		if seen[j] || within[ids[j]] {
			out[i].Result, out[i].Key, out[i].RemovedRelease = ResultDuplicate, store.CountKey{}, ""
			continue
		}
		within[ids[j]] = true
	}
	return out, nil
}
