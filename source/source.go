// Package source opens where the commands read counts: a running Sunset,
// a Sunset reached through kube-apiserver's APIService with a kubeconfig,
// or a data directory read directly. The flags that choose one are
// declared here, so that every command spells them alike.
package source

import (
	"errors"
	"fmt"
	"time"

	"github.com/rs/zerolog"
	"github.com/spf13/pflag"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/kube-sunset/sunset/api"
	"github.com/kube-sunset/sunset/app"
	"github.com/kube-sunset/sunset/client"
	"github.com/kube-sunset/sunset/report"
)

// DefaultServer is where commands look when no source is given.
const DefaultServer = "http://localhost:8080"

// Flags are the flags that choose and reach a source.
type Flags struct {
	Server, CAFile, Token, DataDir, ConfigFile string
	Kubeconfig, Context                        string
	Insecure                                   bool
}

// AddFlags declares the flags on fs.
func (f *Flags) AddFlags(fs *pflag.FlagSet) {
	fs.StringVar(&f.Server, "server", "", "URL of a running Sunset (default "+DefaultServer+" unless --data-dir is given)")
	fs.StringVar(&f.CAFile, "certificate-authority", "", "CA certificate (PEM) to verify an https:// --server")
	fs.StringVar(&f.Token, "token", "", "bearer token to send to --server (for an authenticating proxy)")
	fs.BoolVar(&f.Insecure, "insecure-skip-tls-verify", false, "do not verify the --server certificate")
	fs.StringVar(&f.Kubeconfig, "kubeconfig", "", "reach Sunset through kube-apiserver (its APIService) with this kubeconfig's credentials")
	fs.StringVar(&f.Context, "context", "", "the kubeconfig context to use; alone, the kubeconfig comes from KUBECONFIG or ~/.kube/config")
	fs.StringVar(&f.DataDir, "data-dir", "", "read a Sunset data directory directly, read-only, instead of a server")
	fs.StringVar(&f.ConfigFile, "config", "", "with --data-dir: the server's config file, for its catalog.extra and system-users")
}

// Config is the server configuration --config names, or the defaults.
func (f *Flags) Config() (app.Config, error) {
	if f.ConfigFile == "" {
		return app.DefaultConfig(), nil
	}
	return app.LoadConfig(app.Flags(), f.ConfigFile)
}

// Client is the client of --server (DefaultServer if unset), or of
// kube-apiserver with --kubeconfig or --context.
func (f *Flags) Client() (*client.Client, error) {
	if f.Kubeconfig != "" || f.Context != "" {
		// client-go's loading rules, as kubectl: --kubeconfig, else
		// KUBECONFIG, else ~/.kube/config.
		rules := clientcmd.NewDefaultClientConfigLoadingRules()
		rules.ExplicitPath = f.Kubeconfig
		cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{CurrentContext: f.Context}).ClientConfig()
		if err != nil {
			return nil, fmt.Errorf("loading the kubeconfig: %w", err)
		}
		return client.New(client.Options{REST: cfg})
	}
	server := f.Server
	if server == "" {
		server = DefaultServer
	}
	return client.New(client.Options{Server: server, CAFile: f.CAFile, Token: f.Token, InsecureSkipVerify: f.Insecure})
}

// Run checks req's flags, then opens the source the flags choose, runs req
// against it and releases it.
func (f *Flags) Run(req report.Request, out report.Output) error {
	if err := req.Validate(); err != nil {
		return err
	}
	s, closeSource, err := f.open(out.Now)
	if err != nil {
		return err
	}
	defer closeSource()
	return req.Run(s, out)
}

// open returns the source the flags choose and a function that releases
// it.
func (f *Flags) open(now func() time.Time) (api.Reader, func(), error) {
	viaKube := f.Kubeconfig != "" || f.Context != ""
	if n := countTrue(f.DataDir != "", f.Server != "", viaKube); n > 1 {
		return nil, nil, errors.New("give one of --server, --data-dir and --kubeconfig/--context")
	}
	if f.DataDir == "" {
		c, err := f.Client()
		return c, func() {}, err
	}
	cfg, err := f.Config()
	if err != nil {
		return nil, nil, err
	}
	parts, err := app.OpenParts(cfg, app.PartsOptions{DataDir: f.DataDir, ReadOnly: true, Logger: zerolog.Nop(), Now: now,
		Hint: "A running server holds the data directory: ask it instead with --server " + DefaultServer})
	if err != nil {
		return nil, nil, err
	}
	return dataDir{parts.Service(), parts.WebhookService(), cfg.Retention}, func() { _ = parts.Close() }, nil
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

// dataDir reads a data directory: APIRequestCounts and WebhookCounts,
// with the retention of the configuration it was opened with.
type dataDir struct {
	*api.Service
	*api.WebhookService
	retention time.Duration
}

func (d dataDir) Info() (api.ServerInfo, error) { return d.Service.Info(d.retention), nil }
