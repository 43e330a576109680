package main

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/kube-sunset/sunset/config"
)

// FuzzConfigFile loads arbitrary config files the way `sunset serve
// --config` does: it never panics, reports the same problems in the same
// words every time, and whatever it accepts is valid. Seeded with the
// shipped config files and every structured key.
func FuzzConfigFile(f *testing.F) {
	for _, name := range []string{"../../deploy/kubernetes/base/config.yaml", "../../deploy/kubernetes/overlays/kafka/config.yaml"} {
		b, err := os.ReadFile(name)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	for _, seed := range []string{
		"data-dir: /var/lib/sunset\nlisten: :8443\ntls-cert-file: /etc/sunset/tls.crt\ntls-key-file: /etc/sunset/tls.key\ndefault-cluster: prod-eu\nclusters:\n  prod-eu:\n    version: v1.36.3\n",
		"system-users: [\"system:serviceaccount:ops:*\"]\nclusters:\n  minikube:\n    version: v1.15.3\ncatalog:\n  extra:\n    - group: cert-manager.io\n      version: v1alpha2\n      resource: certificates\n      kind: Certificate\n      deprecatedIn: \"1.20\"\n      removedIn: \"1.24\"\n      replacement: {group: cert-manager.io, version: v1, kind: Certificate, resource: certificates}\n",
		"field-rules:\n  - name: service-topology-keys\n    group: \"\"\n    version: v1\n    resource: services\n    verbs: [create, update, patch]\n    field: spec.topologyKeys\n    deprecatedIn: \"1.17\"\n    removedIn: \"1.22\"\n",
		"ingest:\n  files:\n    - path: /var/log/kubernetes/audit/audit.log\n      node: master-0\n      cluster: prod\n",
		"metrics:\n  window: 48h\n  grace: 2h\n  removal-horizon: 3\n  max-series: 500\n  max-clusters: 4\nmax-clients-per-node-hour: 20\nwebhook-allow-unauthenticated: true\nlisten: 0.0.0.0:8080\n",
		"kafka:\n  brokers: [kafka-0:9093]\n  topics: [k8s-audit]\n  startOffset: latest\n  nodeField: hostname\n  sasl:\n    mechanism: scram-sha-512\n    username: sunset\n  tls:\n    enabled: true\n",
		"listen-adress: oops\nretention: 1h\n", //nolint:misspell // The unknown key under test.
		"tls-cert-file: /nonexistent/a\ntls-key-file: /nonexistent/b\ntls-client-ca-file: /nonexistent/c\nwebhook-token-file: /nonexistent/d\nwebhook-token-auth-file: /nonexistent/e\n",
		"retention: [1, 2]\nmetrics: 5\n",
	} {
		f.Add([]byte(seed))
	}

	f.Fuzz(func(t *testing.T, data []byte) {
		path := filepath.Join(t.TempDir(), "sunset.yaml")
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
		cfg, err := config.Load(config.Flags(), path)
		again, err2 := config.Load(config.Flags(), path)
		if (err == nil) != (err2 == nil) || (err != nil && err.Error() != err2.Error()) {
			t.Fatalf("the same file loaded twice:\n%v\n%v", err, err2)
		}
		if err != nil {
			if strings.TrimSpace(err.Error()) == "" {
				t.Fatal("an empty error")
			}
			return
		}
		if !reflect.DeepEqual(cfg, again) {
			t.Fatalf("the same file gave two configs")
		}
		if err := cfg.Validate(); err != nil {
			t.Fatalf("an accepted config is not valid: %v", err)
		}
	})
}
