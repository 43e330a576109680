package main

import (
	"errors"
	"fmt"
	"time"

	"github.com/rs/zerolog"
	"github.com/spf13/pflag"

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

// dataDir is a data directory as a source: the API's service, with the
// retention of the configuration it was opened with.
type dataDir struct {
	*api.Service
	retention time.Duration
}

func (d dataDir) Info() (api.ServerInfo, error) { return d.Service.Info(d.retention), nil }

const defaultServer = "http://localhost:8080"

// sourceFlags are the flags that choose and reach a source.
type sourceFlags struct {
	server, caFile, token, dataDir, configFile string
	insecure                                   bool
}

func (f *sourceFlags) add(fs *pflag.FlagSet) {
	fs.StringVar(&f.server, "server", "", "URL of a running Sunset (default "+defaultServer+" unless --data-dir is given)")
	fs.StringVar(&f.caFile, "certificate-authority", "", "CA certificate (PEM) to verify an https:// --server")
	fs.StringVar(&f.token, "token", "", "bearer token to send to --server (for an authenticating proxy)")
	fs.BoolVar(&f.insecure, "insecure-skip-tls-verify", false, "do not verify the --server certificate")
	fs.StringVar(&f.dataDir, "data-dir", "", "read a Sunset data directory directly, read-only, instead of a server")
	fs.StringVar(&f.configFile, "config", "", "with --data-dir: the server's config file, for its catalog.extra and system-users")
}

// open returns the source and a function that releases it.
func (f *sourceFlags) open(now func() time.Time) (source, func(), error) {
	if f.dataDir != "" && f.server != "" {
		return nil, nil, errors.New("give either --server or --data-dir, not both")
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
	svc := api.NewService(st, cat, rules, noise.New(cfg.SystemUsers).IsSystem, now)
	return dataDir{svc, cfg.Retention}, func() { _ = st.Close() }, nil
}
