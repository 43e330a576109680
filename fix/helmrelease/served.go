package helmrelease

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"k8s.io/client-go/discovery"

	"github.com/kube-sunset/sunset/catalog"
)

// mustMove says which APIs move: those the catalog removes by the target,
// and those the cluster does not serve.
func (f *Fixer) mustMove(ctx context.Context) (mustMove, error) {
	if f.served == nil {
		s, err := discover(ctx, f.Kube.Discovery())
		if err != nil {
			return nil, err
		}
		f.served = s
	}
	return func(group, version, kind string) string {
		if e, ok := f.Catalog.LookupKind(group, version, kind); ok && !f.Target.IsZero() && !e.Removed().IsZero() && !f.Target.Less(e.Removed()) {
			return "removed in " + e.Removed().String()
		}
		if !f.served.serves(group, version, kind) {
			return "not served by the cluster"
		}
		return ""
	}, nil
}

// served are the kinds the cluster serves, by group version.
type served struct {
	kinds map[string]map[string]bool
	// unknown are the group versions whose discovery failed: what they
	// serve is unknown, so nothing of them is taken as removed.
	unknown map[string]bool
}

func (s *served) serves(group, version, kind string) bool {
	gv := catalog.GroupVersion(group, version)
	return s.unknown[gv] || s.kinds[gv][kind]
}

func discover(ctx context.Context, d discovery.DiscoveryInterface) (*served, error) {
	_, lists, err := discovery.ToDiscoveryInterfaceWithContext(d).ServerGroupsAndResourcesWithContext(ctx)
	s := &served{kinds: map[string]map[string]bool{}, unknown: map[string]bool{}}
	var partial *discovery.ErrGroupDiscoveryFailed
	if errors.As(err, &partial) {
		for gv := range partial.Groups {
			s.unknown[gv.String()] = true
		}
	} else if err != nil {
		return nil, fmt.Errorf("reading the APIs the cluster serves (discovery): %w", err)
	}
	for _, l := range lists {
		if s.kinds[l.GroupVersion] == nil {
			s.kinds[l.GroupVersion] = map[string]bool{}
		}
		for _, r := range l.APIResources {
			if !strings.Contains(r.Name, "/") {
				s.kinds[l.GroupVersion][r.Kind] = true
			}
		}
	}
	return s, nil
}
