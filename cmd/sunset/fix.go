package main

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/kube-sunset/sunset/cli"
	"github.com/kube-sunset/sunset/fix/helmrelease/helmstore"
)

// holdEnv, set to anything, holds `fix crd` after its first page's
// progress line until it is killed: the end-to-end test interrupts the
// fix there, halfway, to show that running it again finishes the job.
const holdEnv = "SUNSET_TEST_HOLD_FIX_CRD"

// holdReleasesEnv, set to a step of `fix releases` (backup, revision or
// supersede), holds the fix before that write, after saying so on standard
// error, until it is killed: the end-to-end test interrupts it there.
const holdReleasesEnv = "SUNSET_TEST_HOLD_FIX_RELEASES"

// newFixCommand is the parent of the fixes, each a subcommand.
func newFixCommand(env console) *cobra.Command {
	cmd := &cobra.Command{Use: "fix", Short: "Repair what the scan reports, on a cluster", Args: cobra.NoArgs}
	cmd.AddCommand(newFixCRDCommand(env), newFixReleasesCommand(env))
	return cmd
}

func newFixCRDCommand(env console) *cobra.Command {
	req := cli.FixCRDRequest{}
	cmd := withHelp(&cobra.Command{Use: "crd (NAME... | --all)",
		Short: "Rewrite a CRD's objects at its storage version, then trim status.storedVersions to it"}, "fix-crd")
	fs := cmd.Flags()
	fs.BoolVar(&req.All, "all", false, "fix every CRD whose status.storedVersions lists a version other than its storage version")
	fs.BoolVar(&req.DryRun, "dry-run", false, "count the objects that would be rewritten and say what would change; write nothing")
	fs.StringVar(&req.Method, "method", "auto", "how objects are rewritten: auto (a StorageVersionMigration where the cluster serves one and a migrator takes it up, else one by one), migration, or rewrite (one by one)")
	fs.DurationVar(&req.StartTimeout, "migration-start-timeout", cli.DefaultMigrationStartTimeout, "how long a StorageVersionMigration may wait for a migrator to take it up before --method auto deletes it and rewrites the objects one by one")
	fs.Int64Var(&req.ChunkSize, "chunk-size", cli.DefaultChunkSize, "how many objects each list request asks for, as kubectl's --chunk-size")
	fs.StringVar(&req.Kubeconfig, "kubeconfig", "", "the kubeconfig of the cluster to fix (default: KUBECONFIG or ~/.kube/config)")
	fs.StringVar(&req.Context, "context", "", "the kubeconfig context to use")
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		req.Names = args
		if env.getenv != nil && env.getenv(holdEnv) != "" {
			req.AfterPage = func(ctx context.Context) { <-ctx.Done() }
		}
		if err := req.Validate(); err != nil {
			return err
		}
		return req.Run(cmd.Context(), env.output())
	}
	return cmd
}

func newFixReleasesCommand(env console) *cobra.Command {
	// The Helm SDK's records, which only the binary links.
	req := cli.FixReleasesRequest{Records: helmstore.Records{}}
	cmd := withHelp(&cobra.Command{Use: "releases [RELEASE]", Args: cobra.MaximumNArgs(1),
		Short: "Move Helm releases' deployed revisions off removed APIs, as a new revision"}, "fix-releases")
	fs := cmd.Flags()
	fs.StringVarP(&req.Namespace, "namespace", "n", "", "the namespace of the releases (default: the kubeconfig context's)")
	fs.BoolVarP(&req.AllNamespaces, "all-namespaces", "A", false, "fix the releases of every namespace")
	fs.StringVar(&req.TargetVersion, "target-version", "", "the Kubernetes release to upgrade to, e.g. 1.37: APIs it removes move too (default: only APIs the cluster does not serve)")
	fs.BoolVar(&req.DryRun, "dry-run", false, "say what would change; write nothing")
	fs.StringVar(&req.Kubeconfig, "kubeconfig", "", "the kubeconfig of the cluster to fix (default: KUBECONFIG or ~/.kube/config)")
	fs.StringVar(&req.Context, "context", "", "the kubeconfig context to use")
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		if len(args) == 1 {
			req.Release = args[0]
		}
		if env.getenv != nil {
			// Helm's own setting: the records are where Helm keeps them.
			req.Driver = env.getenv("HELM_DRIVER")
			req.HelmNamespace, req.HelmKubeContext = env.getenv("HELM_NAMESPACE"), env.getenv("HELM_KUBECONTEXT")
			if hold := env.getenv(holdReleasesEnv); hold != "" {
				req.BeforeWrite = func(ctx context.Context, release, step, object string) error {
					if step != hold {
						return nil
					}
					fmt.Fprintf(env.stderr, "holding %s before its %s write (%s)\n", release, step, object)
					<-ctx.Done()
					return ctx.Err()
				}
			}
		}
		if err := req.Validate(); err != nil {
			return err
		}
		return req.Run(cmd.Context(), env.output())
	}
	return cmd
}
