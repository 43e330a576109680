package app

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/yaml"

	"github.com/kube-sunset/sunset/api"
	sunsetv1 "github.com/kube-sunset/sunset/api/v1"
	"github.com/kube-sunset/sunset/config"
	"github.com/kube-sunset/sunset/parts"
	"github.com/kube-sunset/sunset/verdict"
)

// exemptionsKey is the ConfigMap's key holding the list, in the config
// file's shape.
const exemptionsKey = "exemptions"

// maxExemptionsBytes bounds the ConfigMap's list before it is decoded.
const maxExemptionsBytes = 1 << 20

// parseExemptionsConfigMap reads the list a ConfigMap holds.
func parseExemptionsConfigMap(cm *corev1.ConfigMap) ([]sunsetv1.Exemption, error) {
	data, ok := cm.Data[exemptionsKey]
	if !ok {
		return nil, fmt.Errorf("ConfigMap %s/%s has no key %q", cm.Namespace, cm.Name, exemptionsKey)
	}
	if len(data) > maxExemptionsBytes {
		return nil, fmt.Errorf("ConfigMap %s/%s: %s is %d bytes, more than %d", cm.Namespace, cm.Name, exemptionsKey, len(data), maxExemptionsBytes)
	}
	var in []config.ExemptionConfig
	if err := yaml.UnmarshalStrict([]byte(data), &in); err != nil {
		return nil, fmt.Errorf("ConfigMap %s/%s: %s: %w", cm.Namespace, cm.Name, exemptionsKey, err)
	}
	out, err := config.ParseExemptions(in)
	if err != nil {
		return nil, fmt.Errorf("ConfigMap %s/%s: %s: %w", cm.Namespace, cm.Name, exemptionsKey, err)
	}
	return out, nil
}

// configMapGetter is what reading the exemptions' ConfigMap needs.
type configMapGetter interface {
	Get(ctx context.Context, name string, opts metav1.GetOptions) (*corev1.ConfigMap, error)
}

// exemptionSource holds the exemptions in force: the config file's and,
// with exemptions-configmap, the ConfigMap's last good list. A bad
// ConfigMap keeps that list and says why (Problem, the log).
type exemptionSource struct {
	static []sunsetv1.Exemption
	cms    configMapGetter
	name   string
	log    zerolog.Logger

	mu      sync.Mutex
	fromMap []sunsetv1.Exemption
	problem error
}

// Exemptions are the file's, then the ConfigMap's.
func (s *exemptionSource) Exemptions() []sunsetv1.Exemption {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]sunsetv1.Exemption, 0, len(s.static)+len(s.fromMap))
	return append(append(out, s.static...), s.fromMap...)
}

// Problem is why the last read of the ConfigMap was not taken; nil when
// it was.
func (s *exemptionSource) Problem() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.problem
}

// reload reads the ConfigMap once.
func (s *exemptionSource) reload(ctx context.Context) {
	if s.cms == nil {
		return
	}
	cm, err := s.cms.Get(ctx, s.name, metav1.GetOptions{})
	var list []sunsetv1.Exemption
	if err == nil {
		list, err = parseExemptionsConfigMap(cm)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err != nil {
		s.problem = fmt.Errorf("exemptions-configmap: keeping the last good list of %d: %w", len(s.fromMap), err)
		s.log.Warn().Err(err).Int("kept", len(s.fromMap)).Msg("exemptions-configmap not read; keeping the last good list")
		return
	}
	s.fromMap, s.problem = list, nil
}

// poll reloads every interval until ctx ends.
func (s *exemptionSource) poll(ctx context.Context, every time.Duration) {
	s.reload(ctx)
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			s.reload(ctx)
		}
	}
}

// buildExemptions holds the config file's exemptions and, with
// exemptions-configmap, reads the ConfigMap's through the in-cluster
// config (or KUBECONFIG), from Run on.
func (a *App) buildExemptions(reg prometheus.Registerer, now func() time.Time) error {
	static, err := config.ParseExemptions(a.cfg.Exemptions)
	if err != nil {
		return fmt.Errorf("exemptions: %w", err)
	}
	a.exemptions = &exemptionSource{static: static, log: a.log.With().Str("component", "exemptions").Logger()}
	if ref := a.cfg.ExemptionsConfigMap; ref != "" {
		namespace, name, err := config.ParseConfigMapRef(ref)
		if err != nil {
			return fmt.Errorf("exemptions-configmap: %w", err)
		}
		rest, err := kubeConfig()
		if err != nil {
			return fmt.Errorf("exemptions-configmap: reaching the cluster to read the exemptions from: %w", err)
		}
		kube, err := kubernetes.NewForConfig(rest)
		if err != nil {
			return fmt.Errorf("exemptions-configmap: %w", err)
		}
		a.exemptions.cms, a.exemptions.name = kube.CoreV1().ConfigMaps(namespace), name
	}
	if reg != nil {
		reg.MustRegister(newExemptionsCollector(a.exemptions, a.store, a.parts, now))
	}
	return nil
}

// runExemptions rereads the ConfigMap until ctx ends.
func (a *App) runExemptions(ctx context.Context) error {
	a.exemptions.poll(ctx, configMapPoll)
	return nil
}

// exemptionsCollector is sunset_exemptions{state}: how many exemptions are
// active, expired, and active but matching no request of the last 24h
// (stale), at scrape time.
type exemptionsCollector struct {
	src  *exemptionSource
	svc  *api.Service
	now  func() time.Time
	desc *prometheus.Desc
}

func newExemptionsCollector(src *exemptionSource, q api.Querier, p *parts.Parts, now func() time.Time) *exemptionsCollector {
	if now == nil {
		now = time.Now
	}
	return &exemptionsCollector{src: src, svc: api.NewService(q, p.Catalog, p.Rules, p.System.IsSystem, now), now: now,
		desc: prometheus.NewDesc("sunset_exemptions", "Exemptions of the upgrade verdict by state: active, expired, or stale (active, matching no request in the last 24h).", []string{"state"}, nil)}
}

func (c *exemptionsCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

func (c *exemptionsCollector) Collect(ch chan<- prometheus.Metric) {
	active, expired := verdict.SplitExemptions(c.src.Exemptions(), c.now())
	stale := 0
	if len(active) > 0 {
		list, err := c.svc.List(sunsetv1.Query{Since: sunsetv1.DefaultCheckSince, Users: sunsetv1.MaxUsersToReport})
		if err != nil {
			ch <- prometheus.NewInvalidMetric(c.desc, err)
			return
		}
		stale = len(verdict.StaleExemptions(list, active))
	}
	for state, n := range map[string]int{"active": len(active), "expired": len(expired), "stale": stale} {
		ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, float64(n), state)
	}
}
