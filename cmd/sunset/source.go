package main

import (
	"errors"
	"fmt"
	"time"

	"github.com/rs/zerolog"
	"github.com/spf13/pflag"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/kube-sunset/sunset/admission"
	"github.com/kube-sunset/sunset/api"
	"github.com/kube-sunset/sunset/app"
	"github.com/kube-sunset/sunset/catalog"
	"github.com/kube-sunset/sunset/client"
	"github.com/kube-sunset/sunset/fieldrule"
	"github.com/kube-sunset/sunset/noise"
	"github.com/kube-sunset/sunset/store"
)

// source is where reports read APIRequestCounts: a running server
// (*client.Client) or a data directory (*api.Service).
type source interface {
	List(api.Query) (api.APIRequestCountList, error)
	Get(string, api.Query) (api.APIRequestCount, error)
	Info() (api.ServerInfo, error)
}

const defaultServer = "http://localhost:8080"

// sourceFlags are the flags that choose and reach a source.
type sourceFlags struct {
	server, caFile, token, dataDir, configFile string
	kubeconfig, context                        string
	insecure                                   bool
}

func (f *sourceFlags) add(fs *pflag.FlagSet) {
	fs.StringVar(&f.server, "server", "", "URL of a running Sunset (default "+defaultServer+" unless --data-dir is given)")
	fs.StringVar(&f.caFile, "certificate-authority", "", "CA certificate (PEM) to verify an https:// --server")
	fs.StringVar(&f.token, "token", "", "bearer token to send to --server (for an authenticating proxy)")
	fs.BoolVar(&f.insecure, "insecure-skip-tls-verify", false, "do not verify the --server certificate")
	fs.StringVar(&f.kubeconfig, "kubeconfig", "", "reach Sunset through kube-apiserver (its APIService) with this kubeconfig's credentials")
	fs.StringVar(&f.context, "context", "", "the kubeconfig context to use; alone, the kubeconfig comes from KUBECONFIG or ~/.kube/config")
	fs.StringVar(&f.dataDir, "data-dir", "", "read a Sunset data directory directly, read-only, instead of a server")
	fs.StringVar(&f.configFile, "config", "", "with --data-dir: the server's config file, for its catalog.extra and system-users")
}

// open returns the source and a function that releases it.
func (f *sourceFlags) open(now func() time.Time) (source, func(), error) {
	viaKube := f.kubeconfig != "" || f.context != ""
	if n := countTrue(f.dataDir != "", f.server != "", viaKube); n > 1 {
		return nil, nil, errors.New("give one of --server, --data-dir and --kubeconfig/--context")
	}
	if viaKube {
		// client-go's loading rules, as kubectl: --kubeconfig, else
		// KUBECONFIG, else ~/.kube/config.
		rules := clientcmd.NewDefaultClientConfigLoadingRules()
		rules.ExplicitPath = f.kubeconfig
		cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{CurrentContext: f.context}).ClientConfig()
		if err != nil {
			return nil, nil, fmt.Errorf("loading the kubeconfig: %w", err)
		}
		c, err := client.New(client.Options{REST: cfg})
		return c, func() {}, err
	}
	if f.dataDir == "" {
		server := f.server
		if server == "" {
			server = defaultServer
		}
		c, err := client.New(client.Options{Server: server, CAFile: f.caFile, Token: f.token, InsecureSkipVerify: f.insecure})
		return c, func() {}, err
	}
	cfg := app.DefaultConfig()
	if f.configFile != "" {
		var err error
		if cfg, err = loadConfig(configFlags(), f.configFile); err != nil {
			return nil, nil, err
		}
	}
	st, err := store.Open(store.Options{Dir: f.dataDir, ReadOnly: true, Retention: cfg.Retention, Logger: zerolog.Nop()})
	if err != nil {
		return nil, nil, fmt.Errorf("%w\nA running server holds the data directory: ask it instead with --server %s", err, defaultServer)
	}
	cat, err := catalog.New(cfg.Catalog.Extra)
	if err != nil {
		_ = st.Close()
		return nil, nil, err
	}
	rules, err := fieldrule.New(cfg.FieldRules)
	if err != nil {
		_ = st.Close()
		return nil, nil, err
	}
	classes, err := admission.NewClasses(cfg.Admission.ClassMap())
	if err != nil {
		_ = st.Close()
		return nil, nil, err
	}
	svc := dataDirSource{api.NewService(st, cat, rules, noise.New(cfg.SystemUsers).IsSystem, now), api.NewWebhookService(st, classes, now), cfg.Retention}
	return svc, func() { _ = st.Close() }, nil
}

func countTrue(bs ...bool) int {
	n := 0
	for _, b := range bs {
		if b {
			n++
		}
	}
	return n
}

// dataDirSource reads a data directory: APIRequestCounts and WebhookCounts,
// with the retention of the configuration it was opened with.
type dataDirSource struct {
	*api.Service
	*api.WebhookService
	retention time.Duration
}

func (d dataDirSource) Info() (api.ServerInfo, error) { return d.Service.Info(d.retention), nil }
