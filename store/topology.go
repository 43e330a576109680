package store

import (
	"time"

	"github.com/kube-sunset/sunset/countkey"
)

// Cluster and node names come from senders: a webhook path, a Kafka
// message, a fleet record. Each new name starts new cells of every API's
// counts and a new client cap, so a sender that invents names could grow
// the store without bound. The store keeps at most MaxClusters clusters
// and MaxNodes apiservers per cluster within the retention period, and
// counts the requests of further ones under OtherCluster or OtherNode.
// They are folded rather than skipped: their counts stay exact, and a
// real cluster or apiserver added past the cap is still counted, under a
// name that says the cap was hit, where skipping would lose requests that
// an upgrade check must see.
const (
	// DefaultMaxClusters is MaxClusters when Options leaves it zero: far
	// above any fleet one Sunset serves, far below what fills a disk.
	DefaultMaxClusters = 1000
	// DefaultMaxNodes is MaxNodes when Options leaves it zero. Clusters
	// run three or five apiservers; a node named from its remote address
	// changes a few times over a retention period.
	DefaultMaxNodes = 64
)

// OtherCluster and OtherNode are the names requests of clusters and
// apiservers beyond the caps are counted under.
const (
	OtherCluster = "other"
	OtherNode    = "other"
)

// topology is the clusters and apiservers with counts, each node with the
// last hour it had one: the state of the caps. It is rebuilt from the
// metadata at Open and kept by the commits, under applyMu.
type topology struct {
	maxClusters, maxNodes int
	clusters              map[string]map[string]time.Time
	// prunedAt is the hour expired names were last dropped.
	prunedAt time.Time
}

func newTopology(maxClusters, maxNodes int) *topology {
	return &topology{maxClusters: maxClusters, maxNodes: maxNodes, clusters: map[string]map[string]time.Time{}}
}

// note records that node of cluster had requests in hour.
func (t *topology) note(cluster, node string, hour time.Time) {
	nodes := t.clusters[cluster]
	if nodes == nil {
		nodes = map[string]time.Time{}
		t.clusters[cluster] = nodes
	}
	if last, ok := nodes[node]; !ok || hour.After(last) {
		nodes[node] = hour
	}
}

// prune drops the names whose last hour expired, at most once an hour:
// they free their places under the caps.
func (t *topology) prune(s *Store) {
	now := s.now().UTC().Truncate(time.Hour)
	if !now.After(t.prunedAt) {
		return
	}
	t.prunedAt = now
	for cluster, nodes := range t.clusters {
		for node, last := range nodes {
			if s.Expired(last) {
				delete(nodes, node)
			}
		}
		if len(nodes) == 0 {
			delete(t.clusters, cluster)
		}
	}
}

// topologyCap applies the caps to the requests of one commit; names it
// adds are held apart until the commit succeeds.
type topologyCap struct {
	t       *topology
	pending map[string]map[string]bool
	// foldedClusters and foldedNodes count requests folded.
	foldedClusters, foldedNodes int
}

func newTopologyCap(t *topology) *topologyCap {
	return &topologyCap{t: t, pending: map[string]map[string]bool{}}
}

// key returns k with its cluster and node as counted. The fold names
// themselves are always taken: the caps are exceeded by them alone.
func (c *topologyCap) key(k countkey.CountKey) countkey.CountKey {
	if k.Cluster != OtherCluster && !c.has(k.Cluster, "") {
		if c.clusterCount() >= c.t.maxClusters {
			c.foldedClusters++
			k.Cluster = OtherCluster
		}
	}
	if k.Node != OtherNode && !c.has(k.Cluster, k.Node) {
		if c.nodeCount(k.Cluster) >= c.t.maxNodes {
			c.foldedNodes++
			k.Node = OtherNode
		}
	}
	c.add(k.Cluster, k.Node)
	return k
}

// has reports whether cluster is known, and with node non-empty, whether
// the node is known in it.
func (c *topologyCap) has(cluster, node string) bool {
	nodes, ok := c.t.clusters[cluster]
	added, pok := c.pending[cluster]
	if node == "" || (!ok && !pok) {
		return ok || pok
	}
	_, known := nodes[node]
	return known || added[node]
}

func (c *topologyCap) clusterCount() int {
	n := len(c.t.clusters)
	for cluster := range c.pending {
		if _, ok := c.t.clusters[cluster]; !ok {
			n++
		}
	}
	return n
}

func (c *topologyCap) nodeCount(cluster string) int {
	n := len(c.t.clusters[cluster])
	for node := range c.pending[cluster] {
		if _, ok := c.t.clusters[cluster][node]; !ok {
			n++
		}
	}
	return n
}

func (c *topologyCap) add(cluster, node string) {
	if c.pending[cluster] == nil {
		c.pending[cluster] = map[string]bool{}
	}
	c.pending[cluster][node] = true
}

// rebuildTopology reads the clusters and nodes from the metadata; the
// caller holds applyMu or is Open.
func (s *Store) rebuildTopology() {
	t := newTopology(s.topology.maxClusters, s.topology.maxNodes)
	s.metaMu.RLock()
	for _, info := range s.meta {
		for node, last := range info.Nodes {
			t.note(info.Cluster, node, last)
		}
	}
	s.metaMu.RUnlock()
	s.topology = t
}

// publishFolds counts and logs, once each, what a committed transaction
// folded.
func (s *Store) publishFolds(c *topologyCap) {
	if c.foldedClusters > 0 {
		s.foldedClusters.Add(uint64(c.foldedClusters))
		s.foldClusterOnce.Do(func() {
			s.log.Warn().Int("max_clusters", s.topology.maxClusters).
				Msg("more clusters than the store keeps sent requests; those of further clusters are counted as cluster \"other\" (counts stay exact). " +
					"A misbehaving or hostile sender can cause this")
		})
	}
	if c.foldedNodes > 0 {
		s.foldedNodes.Add(uint64(c.foldedNodes))
		s.foldNodeOnce.Do(func() {
			s.log.Warn().Int("max_nodes", s.topology.maxNodes).
				Msg("a cluster has more apiservers than the store keeps; requests of further ones are counted as node \"other\" (counts stay exact). " +
					"A misbehaving or hostile sender can cause this")
		})
	}
}

// FoldedClusters and FoldedNodes are how many requests were counted as
// OtherCluster or OtherNode since the store was opened.
func (s *Store) FoldedClusters() uint64 { return s.foldedClusters.Load() }

// FoldedNodes: see FoldedClusters.
func (s *Store) FoldedNodes() uint64 { return s.foldedNodes.Load() }
