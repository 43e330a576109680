package config

import (
	"errors"
	"fmt"
	"strings"

	"github.com/kube-sunset/sunset/ingest/eks"
	"github.com/kube-sunset/sunset/ingest/gke"
)

// IngestConfig is the ingest key.
type IngestConfig struct {
	Files []FollowFile `mapstructure:"files"`
	EKS   []eks.Config `mapstructure:"eks"`
	GKE   []gke.Config `mapstructure:"gke"`
}

// FollowFile is one audit log file to follow.
type FollowFile struct {
	Path    string `mapstructure:"path"`
	Node    string `mapstructure:"node"`
	Cluster string `mapstructure:"cluster"`
}

// Validate checks the followed files and the managed-cluster sources,
// each entry under its own key.
func (c IngestConfig) Validate() error {
	var errs []error
	bad := badFunc(&errs)
	seen := map[string]bool{}
	for i, f := range c.Files {
		key := fmt.Sprintf("ingest.files[%d]", i)
		switch {
		case f.Path == "":
			bad(key+".path", "must not be empty")
		case seen[f.Path]:
			bad(key+".path", "%s is followed twice", f.Path)
		}
		seen[f.Path] = true
		if f.Node == "" {
			bad(key+".node", "must name the apiserver that writes %s", f.Path)
		}
	}
	errs = append(errs, c.validateManaged()...)
	return errors.Join(errs...)
}

// validateManaged checks the managed-cluster sources, each under its own
// key, and that no two read the same log into the same cluster: they
// would share a checkpoint.
func (c IngestConfig) validateManaged() []error {
	var errs []error
	seen := map[string]bool{}
	for i, e := range c.EKS {
		key := fmt.Sprintf("ingest.eks[%d]", i)
		e = e.WithDefaults()
		if err := e.Validate(key); err != nil {
			errs = append(errs, err)
			continue
		}
		id := e.Cluster + "\x00" + e.LogGroup
		if seen[id] {
			errs = append(errs, fmt.Errorf("%s: cluster %s reads log group %s a second time", key, e.Cluster, e.LogGroup))
		}
		seen[id] = true
	}
	subscriptions := map[string]bool{}
	for i, g := range c.GKE {
		key := fmt.Sprintf("ingest.gke[%d]", i)
		if err := g.WithDefaults().Validate(); err != nil {
			// gke names its fields alone; each line gets the entry's key.
			for _, line := range strings.Split(err.Error(), "\n") {
				errs = append(errs, fmt.Errorf("%s.%s", key, line))
			}
			continue
		}
		if subscriptions[g.Subscription] {
			// Two receivers would split its messages between clusters.
			errs = append(errs, fmt.Errorf("%s.subscription: %s is read a second time", key, g.Subscription))
		}
		subscriptions[g.Subscription] = true
	}
	return errs
}
