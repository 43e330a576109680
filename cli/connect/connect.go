// Package connect opens where the commands read counts: a running Sunset,
// a Sunset reached through kube-apiserver's APIService with a kubeconfig,
// or a data directory read directly. The flags that choose one are
// declared here, so that every command spells them alike.
//
// With no flag that names a source, the read commands do as kubectl does:
// the kubeconfig of KUBECONFIG (a list of files) or ~/.kube/config, at its
// current context; without one, the Sunset on DefaultServer. They then say
// on standard error which one they read, since the two can disagree.
package connect

import (
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/rs/zerolog"
	"github.com/spf13/pflag"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/kube-sunset/sunset/cli"
	"github.com/kube-sunset/sunset/client"
	"github.com/kube-sunset/sunset/config"
	"github.com/kube-sunset/sunset/parts"
)

// DefaultServer is where commands look when no source is given and no
// kubeconfig names a cluster.
const DefaultServer = "http://localhost:8080"

// defaultRequestTimeout bounds each answer, as client.New would.
const defaultRequestTimeout = "60s"

// Flags are the flags that choose and reach a source.
type Flags struct {
	Server, CAFile, Token, DataDir, ConfigFile string
	Kubeconfig, Context                        string
	Insecure                                   bool
	// As, AsGroups and AsUID impersonate through kube-apiserver, as
	// kubectl's --as, --as-group and --as-uid.
	As, AsUID string
	AsGroups  []string
	// RequestTimeout is kubectl's --request-timeout: a duration, or a
	// bare number of seconds.
	RequestTimeout string
	// Verbosity is -v: from 1 on, the source read is named on standard
	// error even when a flag chose it.
	Verbosity int
	// Namespace is kubectl's -n, which a plugin's users type by habit.
	// Counts are cluster-wide, so it is refused rather than ignored.
	Namespace string

	// Plugin is set when the binary runs as kubectl's plugin. Its users
	// mean kubectl's --server (-s): kube-apiserver's address, reached with
	// the kubeconfig's credentials, rather than a Sunset's URL.
	Plugin bool
	// Getenv reads the environment the kubeconfig is found from
	// (KUBECONFIG, HOME). Nil is an empty environment, so that a test
	// never reads its developer's kubeconfig by accident.
	Getenv func(string) string
}

// AddFlags declares the flags replay uses to reach a server or a data
// directory, which it writes to: its help says so, unlike the read
// commands'.
func (f *Flags) AddFlags(fs *pflag.FlagSet) {
	fs.StringVar(&f.Server, "server", "", "count through the webhook of the running Sunset at this URL, instead of into a data directory")
	fs.StringVar(&f.CAFile, "certificate-authority", "", "CA certificate (PEM) to verify an https:// --server")
	fs.StringVar(&f.Token, "token", "", "bearer token to send to --server (for an authenticating proxy)")
	fs.BoolVar(&f.Insecure, "insecure-skip-tls-verify", false, "do not verify the --server certificate")
	fs.StringVar(&f.Kubeconfig, "kubeconfig", "", "reach Sunset through kube-apiserver (its APIService) with this kubeconfig's credentials")
	fs.StringVar(&f.Context, "context", "", "the kubeconfig context to use; alone, the kubeconfig comes from KUBECONFIG or ~/.kube/config")
	fs.StringVar(&f.DataDir, "data-dir", "", "the data directory to count into, which no running server may hold (default: --config's data-dir, else ./sunset-data)")
	fs.StringVar(&f.ConfigFile, "config", "", "the server's config file, to count as it does: its data-dir, clusters, catalog.extra, field-rules, user-agent and retention")
}

// AddReadFlags declares the flags of the commands that read counts:
// kubectl's, and Sunset's own --server and --data-dir.
func (f *Flags) AddReadFlags(fs *pflag.FlagSet) {
	if f.Plugin {
		fs.StringVarP(&f.Server, "server", "s", "", "the address of kube-apiserver, instead of the kubeconfig's (as kubectl's --server)")
	} else {
		fs.StringVarP(&f.Server, "server", "s", "", "URL of a running Sunset, read directly (default: the kubeconfig's current context, else "+DefaultServer+")")
	}
	fs.StringVar(&f.Kubeconfig, "kubeconfig", "", "read Sunset through kube-apiserver (its APIService) with this kubeconfig (default: KUBECONFIG, else ~/.kube/config)")
	fs.StringVar(&f.Context, "context", "", "the kubeconfig context to use (default: its current context)")
	fs.StringVar(&f.CAFile, "certificate-authority", "", "CA certificate (PEM) that verifies the server, instead of the kubeconfig's")
	fs.StringVar(&f.Token, "token", "", "bearer token for the server, instead of the kubeconfig's")
	fs.BoolVar(&f.Insecure, "insecure-skip-tls-verify", false, "do not verify the server's certificate")
	fs.StringVar(&f.As, "as", "", "user to impersonate through kube-apiserver, as kubectl --as")
	fs.StringArrayVar(&f.AsGroups, "as-group", nil, "group to impersonate through kube-apiserver (repeatable)")
	fs.StringVar(&f.AsUID, "as-uid", "", "UID to impersonate through kube-apiserver")
	fs.StringVar(&f.RequestTimeout, "request-timeout", defaultRequestTimeout, "how long to wait for each answer (e.g. 30s, 5m; a bare number is seconds)")
	fs.IntVarP(&f.Verbosity, "v", "v", 0, "1 or more: name the source read on standard error even when a flag chose it")
	fs.StringVar(&f.DataDir, "data-dir", "", "read a Sunset data directory directly, read-only, instead of a server")
	fs.StringVar(&f.ConfigFile, "config", "", "with --data-dir: the server's config file, for its catalog.extra and system-users")
	if f.Plugin {
		fs.StringVarP(&f.Namespace, "namespace", "n", "", "not used: counts are cluster-wide")
		_ = fs.MarkHidden("namespace")
	}
}

// Config is the server configuration --config names, or the defaults.
func (f *Flags) Config() (config.Config, error) {
	if f.ConfigFile == "" {
		return config.Default(), nil
	}
	return config.Load(config.Flags(), f.ConfigFile)
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

// Run checks req's flags and the source flags, then opens the source they
// choose, says which it is when no flag chose it (or with -v), runs req
// against it and releases it.
func (f *Flags) Run(req cli.Request, out cli.Output) error {
	timeout, err := f.validate()
	if err := errors.Join(req.Validate(), err); err != nil {
		return err
	}
	c, err := f.choose()
	if err != nil {
		return err
	}
	if !c.named || f.Verbosity > 0 {
		fmt.Fprintln(out.Err, c.says)
	}
	s, closeSource, err := c.open(f, timeout, out.Now)
	if err != nil {
		return err
	}
	defer closeSource()
	return req.Run(s, out)
}

// validate checks the flags alone, every problem at once, and returns
// --request-timeout.
func (f *Flags) validate() (time.Duration, error) {
	var errs []error
	viaKube := f.Kubeconfig != "" || f.Context != ""
	switch {
	case f.Plugin && f.DataDir != "" && (f.Server != "" || viaKube):
		errs = append(errs, errors.New("give --data-dir or the kubeconfig flags (--kubeconfig, --context, --server), not both"))
	case !f.Plugin && countTrue(f.DataDir != "", f.Server != "", viaKube) > 1:
		errs = append(errs, errors.New("give one of --server, --data-dir and --kubeconfig/--context"))
	}
	impersonating := f.As != "" || len(f.AsGroups) > 0 || f.AsUID != ""
	if impersonating && (f.DataDir != "" || (!f.Plugin && f.Server != "")) {
		errs = append(errs, errors.New("--as, --as-group and --as-uid impersonate through kube-apiserver: use them with a kubeconfig, not with --server or --data-dir"))
	}
	if f.DataDir != "" && (f.Token != "" || f.CAFile != "" || f.Insecure) {
		errs = append(errs, errors.New("--token, --certificate-authority and --insecure-skip-tls-verify are for a server; --data-dir reads files"))
	}
	if f.Namespace != "" {
		errs = append(errs, fmt.Errorf("-n/--namespace %q: Sunset's counts are cluster-wide (APIRequestCounts are not namespaced); leave it out (report --user system:serviceaccount:%s:NAME lists what one service account calls)", f.Namespace, f.Namespace))
	}
	timeout, err := parseTimeout(f.RequestTimeout)
	errs = append(errs, err)
	return timeout, errors.Join(errs...)
}

// parseTimeout reads --request-timeout as kubectl does: a bare number is
// seconds. Zero, which kubectl reads as "no timeout", is refused: a read
// that hangs forever helps nobody in a pipeline.
func parseTimeout(s string) (time.Duration, error) {
	if s == "" {
		s = defaultRequestTimeout
	}
	d, err := time.ParseDuration(s)
	if seconds, atoiErr := strconv.ParseInt(s, 10, 64); atoiErr == nil {
		d, err = time.Duration(seconds)*time.Second, nil
	}
	if err != nil {
		return 0, fmt.Errorf("--request-timeout %q is not a duration such as 30s or 5m", s)
	}
	if d <= 0 {
		return 0, fmt.Errorf("--request-timeout %s: give a positive duration such as 30s or 5m", s)
	}
	return d, nil
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

// LockHint says what to do when a running server holds the data
// directory: use the server, through --server. Where it listens is known
// only from its config file, if --config names it: the server may have
// been started with other flags, so the address is never guessed.
//
//	A running server holds the data directory: ask it instead with --server and the address it listens on (serve's --listen, http://localhost:8080 when not set).
func (f *Flags) LockHint(do string, cfg config.Config) string {
	hint := "A running server holds the data directory: " + do + " with --server"
	if f.ConfigFile != "" && cfg.LocalURL() != "" {
		return fmt.Sprintf("%s %s (the listen address of %s, unless the server was started with another --listen)", hint, cfg.LocalURL(), f.ConfigFile)
	}
	return hint + " and the address it listens on (serve's --listen, " + DefaultServer + " when not set)"
}

// openDataDir opens the data directory read-only.
func (f *Flags) openDataDir(now func() time.Time) (cli.Reader, func(), error) {
	cfg, err := f.Config()
	if err != nil {
		return nil, nil, err
	}
	parts, err := parts.Open(cfg, parts.Options{DataDir: f.DataDir, ReadOnly: true, Logger: zerolog.Nop(), Now: now,
		Hint: f.LockHint("ask it instead", cfg)})
	if err != nil {
		return nil, nil, err
	}
	return parts.Reader(), func() { _ = parts.Close() }, nil
}
