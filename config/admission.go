package config

import (
	"errors"
	"fmt"

	"github.com/kube-sunset/sunset/admission"
)

// AdmissionConfig is the admission key.
type AdmissionConfig struct {
	Classes  AdmissionClasses      `mapstructure:"classes"`
	Webhooks []admission.WebhookID `mapstructure:"webhooks"`
	Metrics  AdmissionMetrics      `mapstructure:"metrics"`
}

// AdmissionClasses is the admission.classes key: a list replaces its
// default.
type AdmissionClasses struct {
	Critical []string `mapstructure:"critical"`
	Security []string `mapstructure:"security"`
	Virtual  []string `mapstructure:"virtual"`
}

// AdmissionMetrics is the admission.metrics key.
type AdmissionMetrics struct {
	MaxResources int `mapstructure:"max-resources"`
	MaxWebhooks  int `mapstructure:"max-webhooks"`
}

// ClassMap returns the classes as admission.NewClasses takes them.
func (c AdmissionConfig) ClassMap() map[admission.Class][]string {
	return map[admission.Class][]string{admission.Critical: c.Classes.Critical, admission.Security: c.Classes.Security,
		admission.Virtual: c.Classes.Virtual}
}

func defaultAdmission() AdmissionConfig {
	d := admission.DefaultClasses()
	return AdmissionConfig{
		Classes: AdmissionClasses{Critical: d[admission.Critical], Security: d[admission.Security], Virtual: d[admission.Virtual]},
		Metrics: AdmissionMetrics{MaxResources: admission.DefaultMaxResources, MaxWebhooks: admission.DefaultMaxWebhooks},
	}
}

// Validate checks the admission key: the classes, the webhooks named and
// the bounds of their labels.
func (c AdmissionConfig) Validate() error {
	var errs []error
	if _, err := admission.NewClasses(c.ClassMap()); err != nil {
		errs = append(errs, err)
	}
	for i, w := range c.Webhooks {
		if w.Webhook == "" || len(w.Webhook) > admission.MaxNameBytes || len(w.Configuration) > admission.MaxNameBytes {
			errs = append(errs, fmt.Errorf("admission.webhooks[%d].webhook: must name a webhook (at most %d bytes), "+
				"as in its configuration's webhooks[].name", i, admission.MaxNameBytes))
		}
	}
	if c.Metrics.MaxResources < 1 {
		errs = append(errs, fmt.Errorf("admission.metrics.max-resources: must be at least 1, got %d", c.Metrics.MaxResources))
	}
	if c.Metrics.MaxWebhooks < 1 {
		errs = append(errs, fmt.Errorf("admission.metrics.max-webhooks: must be at least 1, got %d", c.Metrics.MaxWebhooks))
	}
	return errors.Join(errs...)
}
