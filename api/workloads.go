package api

import (
	"cmp"
	"slices"

	sunsetv1 "github.com/kube-sunset/sunset/api/v1"
	"github.com/kube-sunset/sunset/store"
	"github.com/kube-sunset/sunset/workload"
)

// shownClients are the clients listed in some byUser of the last status,
// by cluster, for their workload records to be read.
func (b *builder) shownClients() map[string][]store.ClientID {
	out := map[string][]store.ClientID{}
	for _, c := range b.clients {
		if c.shown {
			out[c.id.cluster] = append(out[c.id.cluster], store.ClientID{Username: c.id.username, UserAgent: c.id.userAgent})
		}
	}
	return out
}

// workloads describes, once per client listed in byUser, what runs behind
// it, from the records read for each cluster; clients with nothing known
// are left out. The list is sorted by cluster, username and user agent.
func (b *builder) workloads(records map[string]map[store.ClientID]store.Workload) []sunsetv1.ClientWorkload {
	var out []sunsetv1.ClientWorkload
	for _, c := range b.clients {
		if !c.shown {
			continue
		}
		seen := records[c.id.cluster][store.ClientID{Username: c.id.username, UserAgent: c.id.userAgent}]
		cw := sunsetv1.ClientWorkload{Cluster: c.id.cluster, UserName: c.id.username, UserAgent: c.id.userAgent,
			Workload: workloadOf(c.id.username, seen), ImpersonatedBy: impersonators(seen)}
		if cw.Workload != nil || cw.ImpersonatedBy != nil {
			out = append(out, cw)
		}
	}
	slices.SortFunc(out, func(x, y sunsetv1.ClientWorkload) int {
		return cmp.Or(cmp.Compare(x.Cluster, y.Cluster), cmp.Compare(x.UserName, y.UserName), cmp.Compare(x.UserAgent, y.UserAgent))
	})
	return out
}

// impersonators are the real callers seen making requests as a client.
func impersonators(seen store.Workload) []sunsetv1.Impersonator {
	var out []sunsetv1.Impersonator
	for _, c := range seen.ImpersonatedBy {
		out = append(out, sunsetv1.Impersonator{UserName: c.Username, LastSeen: c.LastSeen})
	}
	return out
}

// workloadOf describes a client: namespace and service account from its
// username, pods and addresses from what the store saw.
func workloadOf(username string, seen store.Workload) *sunsetv1.Workload {
	var w sunsetv1.Workload
	w.Namespace, w.ServiceAccount, _ = workload.ServiceAccount(username)
	for _, p := range seen.Pods {
		w.Pods = append(w.Pods, sunsetv1.WorkloadPod{Name: p.Name, Node: p.Node, LastSeen: p.LastSeen})
	}
	for _, ip := range seen.SourceIPs {
		w.SourceIPs = append(w.SourceIPs, sunsetv1.SourceIP{IP: ip.IP, LastSeen: ip.LastSeen})
	}
	if len(w.Pods) > 0 {
		kind, name := workload.Owner(w.Pods[0].Name)
		w.Owner = &sunsetv1.Owner{Kind: kind, Name: name}
	}
	if w.Namespace == "" && len(w.Pods) == 0 && len(w.SourceIPs) == 0 {
		return nil
	}
	return &w
}
