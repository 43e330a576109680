package convert

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"
	"sigs.k8s.io/yaml"
)

// TestOmitOldDefaults writes only what the replacement requires: the
// selector apps/v1 requires and the admissionReviewVersions
// admissionregistration v1 requires, none of the old defaults.
func TestOmitOldDefaults(t *testing.T) {
	tab := builtinTable(t)
	for _, tc := range []struct{ name, in, want string }{
		{"deployment", `apiVersion: extensions/v1beta1
kind: Deployment
metadata: {name: web}
spec:
  template:
    metadata: {labels: {app: web}}
`, `apiVersion: apps/v1
kind: Deployment
metadata: {name: web}
spec:
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
`},
		{"daemonset", `apiVersion: extensions/v1beta1
kind: DaemonSet
metadata: {name: agent}
spec:
  template:
    metadata: {labels: {app: agent}}
`, `apiVersion: apps/v1
kind: DaemonSet
metadata: {name: agent}
spec:
  selector: {matchLabels: {app: agent}}
  template:
    metadata: {labels: {app: agent}}
`},
		{"statefulset", `apiVersion: apps/v1beta1
kind: StatefulSet
metadata: {name: db}
spec:
  selector: {matchLabels: {app: db}}
  template:
    metadata: {labels: {app: db}}
`, `apiVersion: apps/v1
kind: StatefulSet
metadata: {name: db}
spec:
  selector: {matchLabels: {app: db}}
  template:
    metadata: {labels: {app: db}}
`},
		{"webhook", `apiVersion: admissionregistration.k8s.io/v1beta1
kind: ValidatingWebhookConfiguration
metadata: {name: check}
webhooks:
- name: check.example.com
  sideEffects: None
  clientConfig: {url: "https://check.example.com"}
`, `apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingWebhookConfiguration
metadata: {name: check}
webhooks:
- name: check.example.com
  sideEffects: None
  admissionReviewVersions: [v1beta1]
  clientConfig: {url: "https://check.example.com"}
`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var in, want map[string]any
			require.NoError(t, yaml.Unmarshal([]byte(tc.in), &in))
			require.NoError(t, yaml.Unmarshal([]byte(tc.want), &want))
			got, err := tab.Convert(in, OmitOldDefaults())
			require.NoError(t, err)
			require.Equal(t, want, got)
		})
	}
}

// TestOldDefaultsWrittenByDefault keeps what a manifest applied afresh
// needs: the extensions/v1beta1 Deployment's defaults.
func TestOldDefaultsWrittenByDefault(t *testing.T) {
	var in, want map[string]any
	require.NoError(t, yaml.Unmarshal([]byte(`apiVersion: extensions/v1beta1
kind: Deployment
metadata: {name: web}
spec:
  template:
    metadata: {labels: {app: web}}
`), &in))
	require.NoError(t, yaml.Unmarshal([]byte(`apiVersion: apps/v1
kind: Deployment
metadata: {name: web}
spec:
  selector: {matchLabels: {app: web}}
  revisionHistoryLimit: 2147483647
  progressDeadlineSeconds: 2147483647
  strategy: {type: RollingUpdate, rollingUpdate: {maxSurge: 1, maxUnavailable: 1}}
  template:
    metadata: {labels: {app: web}}
`), &want))
	got, err := builtinTable(t).Convert(in)
	require.NoError(t, err)
	// yaml decodes numbers as float64; Convert writes int64.
	b, err := json.Marshal(got)
	require.NoError(t, err)
	var gotJSON map[string]any
	require.NoError(t, json.Unmarshal(b, &gotJSON))
	wantB, err := json.Marshal(want)
	require.NoError(t, err)
	var wantJSON map[string]any
	require.NoError(t, json.Unmarshal(wantB, &wantJSON))
	require.Equal(t, wantJSON, gotJSON)
}
