package cli

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"

	"github.com/kube-sunset/sunset/fix/crdstorage"
)

// DefaultChunkSize is --chunk-size's default.
const DefaultChunkSize = crdstorage.DefaultPageSize

// DefaultMigrationStartTimeout is --migration-start-timeout's default.
const DefaultMigrationStartTimeout = crdstorage.DefaultStartTimeout

// FixCRDRequest is `sunset fix crd`.
type FixCRDRequest struct {
	Names []string
	// All fixes every CRD whose status.storedVersions lists a version
	// other than its storage version.
	All bool
	// Kubeconfig and Context choose the cluster, as kubectl's flags do.
	Kubeconfig, Context string
	DryRun              bool
	// ChunkSize is the list limit (--chunk-size).
	ChunkSize int64
	// Method is --method: auto, migration or rewrite.
	Method string
	// StartTimeout is --migration-start-timeout.
	StartTimeout time.Duration
	// AfterPage, if set, runs after each page's progress line; a test
	// holds the fix there to interrupt it at a known point.
	AfterPage func(context.Context)
}

// Validate checks the flags.
func (r *FixCRDRequest) Validate() error {
	var errs []error
	switch {
	case r.All && len(r.Names) > 0:
		errs = append(errs, errors.New("give CRD names or --all, not both"))
	case !r.All && len(r.Names) == 0:
		errs = append(errs, errors.New("give the names of the CRDs to fix (e.g. widgets.example.com), or --all for every CRD whose status.storedVersions lists an old version"))
	}
	if _, err := crdstorage.ParseMethod(r.Method); err != nil {
		errs = append(errs, err)
	}
	if r.StartTimeout <= 0 {
		errs = append(errs, fmt.Errorf("--migration-start-timeout %s must be positive", r.StartTimeout))
	}
	if r.ChunkSize < 1 {
		errs = append(errs, fmt.Errorf("--chunk-size %d must be at least 1", r.ChunkSize))
	}
	return errors.Join(errs...)
}

// Run fixes each CRD in turn, printing its progress as it goes. A CRD that
// cannot be fixed is reported and the others are still fixed; any such
// CRD makes the command exit 1.
func (r *FixCRDRequest) Run(ctx context.Context, out Output) error {
	cfg, err := kubeConfig(r.Kubeconfig, r.Context)
	if err != nil {
		return err
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return err
	}
	disc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return err
	}
	method, _ := crdstorage.ParseMethod(r.Method)
	m := &crdstorage.Migrator{Dynamic: dyn, Discovery: disc, Method: method, StartTimeout: r.StartTimeout,
		DryRun: r.DryRun, PageSize: r.ChunkSize}
	verb := "rewritten"
	if r.DryRun {
		verb = "to rewrite"
	}
	m.Progress = func(p crdstorage.Progress) {
		if p.Migration != "" {
			fmt.Fprintln(out.Out, Terminal(migrationLine(p)))
			return
		}
		line := fmt.Sprintf("%s: %d objects %s at %s", p.CRD, p.Rewritten, verb, p.Storage)
		if p.Failed > 0 {
			line += fmt.Sprintf(", %d not rewritten", p.Failed)
		}
		fmt.Fprintln(out.Out, Terminal(line))
		if r.AfterPage != nil {
			r.AfterPage(ctx)
		}
	}
	names := r.Names
	if r.All {
		if names, err = m.Pending(ctx); err != nil {
			return err
		}
		if len(names) == 0 {
			fmt.Fprintln(out.Out, "no CustomResourceDefinition lists a version other than its storage version in status.storedVersions")
			return nil
		}
	}
	failed := 0
	for _, name := range names {
		res, err := m.Migrate(ctx, name)
		if err != nil {
			failed++
			for _, f := range res.Failed {
				fmt.Fprintln(out.Err, "Error:", Terminal(res.CRD+": not rewritten: "+f.String()))
			}
			fmt.Fprintln(out.Err, "Error:", Terminal(err.Error()))
			if errors.Is(err, crdstorage.ErrIncomplete) {
				fmt.Fprintln(out.Err, Terminal("Fix what kept those objects from being written (an admission webhook, a validation rule, a finalizer), then run `sunset fix crd "+name+"` again: it rewrites only what is needed."))
			}
			continue
		}
		fmt.Fprintln(out.Out, Terminal(summary(res, r.DryRun)))
	}
	if failed > 0 {
		err := fmt.Errorf("%d of %d CustomResourceDefinitions were not fixed", failed, len(names))
		fmt.Fprintln(out.Err, "Error:", err)
		return &ExitCodeError{Code: ExitError, Err: err}
	}
	return nil
}

// migrationLine says how a StorageVersionMigration stands.
func migrationLine(p crdstorage.Progress) string {
	switch p.State {
	case "":
		return fmt.Sprintf("%s: %s created, waiting for a migrator to take it up", p.CRD, p.Migration)
	case "Running":
		return fmt.Sprintf("%s: %s running, rewriting the objects at %s", p.CRD, p.Migration, p.Storage)
	}
	return fmt.Sprintf("%s: %s %s", p.CRD, p.Migration, strings.ToLower(p.State))
}

func summary(res crdstorage.Result, dryRun bool) string {
	before := "[" + strings.Join(res.Before, " ") + "]"
	switch {
	case res.UpToDate:
		return fmt.Sprintf("%s: status.storedVersions is already %s, nothing to do", res.CRD, before)
	case dryRun && res.Migration != "":
		return fmt.Sprintf("%s: would create %s to rewrite %d objects at %s (or rewrite them itself if no migrator takes it up), then set status.storedVersions %s -> [%s] (dry run: nothing written)", res.CRD, res.Migration, res.Rewritten, res.Storage, before, res.Storage)
	case dryRun:
		return fmt.Sprintf("%s: would rewrite %d objects at %s, then set status.storedVersions %s -> [%s] (dry run: nothing written)", res.CRD, res.Rewritten, res.Storage, before, res.Storage)
	case res.Migration != "":
		return fmt.Sprintf("%s: objects rewritten at %s by %s; status.storedVersions %s -> [%s]", res.CRD, res.Storage, res.Migration, before, res.Storage)
	}
	return fmt.Sprintf("%s: %d objects rewritten at %s; status.storedVersions %s -> [%s]", res.CRD, res.Rewritten, res.Storage, before, res.Storage)
}
