package aggregate

import (
	"cmp"
	"slices"
	"time"

	"github.com/kube-sunset/sunset/countkey"
	"github.com/kube-sunset/sunset/store"
)

// Caps on what a workload record keeps, so memory and disk stay bounded
// however many pods a client runs.
const (
	MaxPods = 10
	// MaxImpersonators bounds the real callers kept for a client that was
	// impersonated.
	MaxImpersonators = 10
)

// StoreMerge is how counted requests merge into what the store keeps: the
// removed release of an API or field rule, and the workload records of its
// clients. Pass it as store.Options.Merge to a store Sunset counts into.
func StoreMerge() store.Merge {
	return store.Merge{RemovedRelease: removedRelease, Sighting: addSighting}
}

// removedRelease is the removed release an API or field rule keeps: the
// newest hour decides, as an upgraded apiserver may announce a different
// release; a request that announces none changes nothing.
func removedRelease(stored string, last time.Time, given string, hour time.Time) string {
	if given != "" && (stored == "" || hour.After(last)) {
		return given
	}
	return stored
}

// addSighting merges a sighting into a workload record, keeping the most
// recent entries within the caps.
func addSighting(w *store.Workload, s countkey.Sighting) {
	if s.PodName != "" {
		i := slices.IndexFunc(w.Pods, func(p store.PodSeen) bool { return p.Name == s.PodName })
		if i < 0 {
			w.Pods = append(w.Pods, store.PodSeen{Name: s.PodName, Node: s.PodNode, LastSeen: s.At})
		} else if s.At.After(w.Pods[i].LastSeen) {
			w.Pods[i].LastSeen, w.Pods[i].Node = s.At, cmp.Or(s.PodNode, w.Pods[i].Node)
		}
		slices.SortStableFunc(w.Pods, func(a, b store.PodSeen) int { return b.LastSeen.Compare(a.LastSeen) })
		w.Pods = w.Pods[:min(len(w.Pods), MaxPods)]
	}
	for _, ip := range s.SourceIPs {
		i := slices.IndexFunc(w.SourceIPs, func(e store.IPSeen) bool { return e.IP == ip })
		if i < 0 {
			w.SourceIPs = append(w.SourceIPs, store.IPSeen{IP: ip, LastSeen: s.At})
		} else if s.At.After(w.SourceIPs[i].LastSeen) {
			w.SourceIPs[i].LastSeen = s.At
		}
	}
	slices.SortStableFunc(w.SourceIPs, func(a, b store.IPSeen) int { return b.LastSeen.Compare(a.LastSeen) })
	w.SourceIPs = w.SourceIPs[:min(len(w.SourceIPs), countkey.MaxSourceIPs)]
	if s.ImpersonatedBy != "" {
		i := slices.IndexFunc(w.ImpersonatedBy, func(c store.CallerSeen) bool { return c.Username == s.ImpersonatedBy })
		if i < 0 {
			w.ImpersonatedBy = append(w.ImpersonatedBy, store.CallerSeen{Username: s.ImpersonatedBy, LastSeen: s.At})
		} else if s.At.After(w.ImpersonatedBy[i].LastSeen) {
			w.ImpersonatedBy[i].LastSeen = s.At
		}
		slices.SortStableFunc(w.ImpersonatedBy, func(a, b store.CallerSeen) int { return b.LastSeen.Compare(a.LastSeen) })
		w.ImpersonatedBy = w.ImpersonatedBy[:min(len(w.ImpersonatedBy), MaxImpersonators)]
	}
}
