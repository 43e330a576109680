package test

import (
	"bytes"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	yamlv3 "go.yaml.in/yaml/v3"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/yaml"
)

const (
	argoPreSync   = "../deploy/pipeline/argocd-presync.yaml"
	githubActions = "../deploy/pipeline/github-actions.yaml"
	gateDoc       = "../docs/gate.md"
)

// checkFlags are the flags `sunset check --help` of the built binary
// lists.
func checkFlags(t *testing.T) map[string]bool {
	t.Helper()
	out, err := exec.Command(sunsetBin, "check", "--help").CombinedOutput()
	require.NoError(t, err, "%s", out)
	flags := map[string]bool{}
	for _, m := range regexp.MustCompile(`(?m)^\s+(?:-\w, )?--([a-z0-9-]+)`).FindAllStringSubmatch(string(out), -1) {
		flags[m[1]] = true
	}
	require.True(t, flags["target-version"] && flags["server"] && flags["kubeconfig"], "parsed %v from:\n%s", flags, out)
	return flags
}

// requireCheckArgs checks a `sunset check` command line of a pipeline:
// every flag is one check has, given once as --name=value, and it names
// a cluster and a target version.
func requireCheckArgs(t *testing.T, where string, args []string) map[string]string {
	t.Helper()
	require.Equal(t, "check", args[0], where)
	flags := checkFlags(t)
	values := map[string]string{}
	for _, a := range args[1:] {
		name, value, ok := strings.Cut(strings.TrimPrefix(a, "--"), "=")
		require.True(t, strings.HasPrefix(a, "--") && ok, "%s: %q: write --name=value", where, a)
		require.True(t, flags[name], "%s: --%s is not a flag of `sunset check`", where, name)
		require.NotContains(t, values, name, "%s: --%s given twice", where, name)
		values[name] = value
	}
	require.NotEmpty(t, values["cluster"], where)
	require.NotEmpty(t, values["target-version"], where)
	return values
}

// The Argo CD PreSync hook decodes strictly as the kinds it holds, each a
// PreSync hook; its Job runs the image's binary with real flags of `sunset
// check`, through kube-apiserver with the kubeconfig its ConfigMap holds,
// which names the service account's own token and CA; and its
// ServiceAccount is bound to sunset:view, all in one namespace.
func TestDeployArgoCDPreSyncHook(t *testing.T) {
	raw, err := os.ReadFile(argoPreSync)
	require.NoError(t, err)
	var job batchv1.Job
	var cm corev1.ConfigMap
	var sa corev1.ServiceAccount
	var crb rbacv1.ClusterRoleBinding
	kinds := map[string]any{"Job": &job, "ConfigMap": &cm, "ServiceAccount": &sa, "ClusterRoleBinding": &crb}
	var seen []string
	for _, doc := range strings.Split(string(raw), "\n---\n") {
		var meta struct {
			Kind     string `json:"kind"`
			Metadata struct {
				Annotations map[string]string `json:"annotations"`
			} `json:"metadata"`
		}
		require.NoError(t, yaml.Unmarshal([]byte(doc), &meta))
		into, ok := kinds[meta.Kind]
		require.True(t, ok, "a %s", meta.Kind)
		require.NoError(t, yaml.UnmarshalStrict([]byte(doc), into), meta.Kind)
		require.Equal(t, "PreSync", meta.Metadata.Annotations["argocd.argoproj.io/hook"], meta.Kind)
		require.Equal(t, "BeforeHookCreation", meta.Metadata.Annotations["argocd.argoproj.io/hook-delete-policy"], meta.Kind)
		seen = append(seen, meta.Kind)
	}
	require.Equal(t, []string{"ServiceAccount", "ClusterRoleBinding", "ConfigMap", "Job"}, seen)

	spec := job.Spec.Template.Spec
	require.Equal(t, sa.Name, spec.ServiceAccountName)
	require.Equal(t, sa.Namespace, job.Namespace)
	require.Equal(t, cm.Namespace, job.Namespace)
	require.Equal(t, ptrTo(int32(0)), job.Spec.BackoffLimit, "a refusal is not retried")
	require.Equal(t, corev1.RestartPolicyNever, spec.RestartPolicy)
	require.Len(t, spec.Containers, 1)
	c := spec.Containers[0]
	require.Equal(t, manifestImage+":"+baseImageTag(t), c.Image)
	require.Equal(t, []string{"/usr/local/bin/sunset"}, c.Command, "the image's binary (Dockerfile)")
	dockerfile, err := os.ReadFile("../Dockerfile")
	require.NoError(t, err)
	require.Contains(t, string(dockerfile), "COPY --from=build /out/sunset "+c.Command[0]+"\n")
	args := requireCheckArgs(t, argoPreSync, c.Args)
	require.Equal(t, "false", args["scan-cluster"], "the cluster the Job runs in is not the one being upgraded")

	// The kubeconfig is where the Job mounts the ConfigMap, and names the
	// token and CA kubelet mounts for the service account.
	require.Len(t, c.VolumeMounts, 1)
	require.Len(t, spec.Volumes, 1)
	require.Equal(t, c.VolumeMounts[0].Name, spec.Volumes[0].Name)
	require.Equal(t, cm.Name, spec.Volumes[0].ConfigMap.Name)
	require.Equal(t, c.VolumeMounts[0].MountPath+"/kubeconfig", args["kubeconfig"])
	kc, err := clientcmd.Load([]byte(cm.Data["kubeconfig"]))
	require.NoError(t, err)
	ctx := kc.Contexts[kc.CurrentContext]
	require.NotNil(t, ctx)
	require.Equal(t, "https://kubernetes.default.svc", kc.Clusters[ctx.Cluster].Server)
	require.Equal(t, "/var/run/secrets/kubernetes.io/serviceaccount/ca.crt", kc.Clusters[ctx.Cluster].CertificateAuthority)
	require.Equal(t, "/var/run/secrets/kubernetes.io/serviceaccount/token", kc.AuthInfos[ctx.AuthInfo].TokenFile)

	// Read access to Sunset, and nothing more.
	require.Equal(t, rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "sunset:view"}, crb.RoleRef)
	require.Equal(t, []rbacv1.Subject{{Kind: "ServiceAccount", Name: sa.Name, Namespace: sa.Namespace}}, crb.Subjects)
	require.Contains(t, clusterRoles(t, render(t, "kubernetes/base")), crb.RoleRef.Name)
}

// The GitHub Actions workflow parses, and its step runs the image's
// binary with real flags of `sunset check`, reading Sunset directly.
func TestDeployGitHubActionsStep(t *testing.T) {
	raw, err := os.ReadFile(githubActions)
	require.NoError(t, err)
	var wf struct {
		Name        string            `yaml:"name"`
		On          map[string]any    `yaml:"on"`
		Permissions map[string]string `yaml:"permissions"`
		Jobs        map[string]struct {
			RunsOn string `yaml:"runs-on"`
			Steps  []struct {
				Name string            `yaml:"name"`
				Uses string            `yaml:"uses"`
				Env  map[string]string `yaml:"env"`
				Run  string            `yaml:"run"`
			} `yaml:"steps"`
		} `yaml:"jobs"`
	}
	// YAML 1.2, as GitHub reads it: `on` is a word, not true.
	dec := yamlv3.NewDecoder(bytes.NewReader(raw))
	dec.KnownFields(true)
	require.NoError(t, dec.Decode(&wf))
	require.Contains(t, wf.On, "pull_request")
	job, ok := wf.Jobs["sunset-check"]
	require.True(t, ok)
	require.Len(t, job.Steps, 2)
	step := job.Steps[1]
	// The script's last command, its continued lines joined.
	script := strings.ReplaceAll(step.Run, "\\\n", " ")
	lines := strings.Split(strings.TrimSpace(script), "\n")
	fields := strings.Fields(lines[len(lines)-1])
	image := slices.Index(fields, manifestImage+":"+baseImageTag(t))
	require.Positive(t, image, "the step runs %s:%s: %q", manifestImage, baseImageTag(t), fields)
	require.Contains(t, fields[:image], "--entrypoint")
	require.Equal(t, "/usr/local/bin/sunset", fields[slices.Index(fields, "--entrypoint")+1])
	var args []string
	for _, f := range fields[image+1:] {
		args = append(args, strings.ReplaceAll(f, `"`, ""))
	}
	values := requireCheckArgs(t, githubActions, args)
	require.True(t, strings.HasPrefix(values["server"], "https://"), "the token goes over HTTPS only")
	require.Equal(t, "$GATE_TOKEN", values["token"])
	require.Equal(t, "$version", values["target-version"])
	require.Contains(t, step.Env, "GATE_TOKEN")
}

// docs/gate.md shows the pipeline files whole, as shipped.
func TestDeployPipelineFilesAreTheDocs(t *testing.T) {
	page, err := os.ReadFile(gateDoc)
	require.NoError(t, err)
	for _, file := range []string{argoPreSync, githubActions} {
		raw, err := os.ReadFile(file)
		require.NoError(t, err)
		require.Contains(t, string(page), "```yaml\n"+string(raw)+"```\n", "%s shows %s whole", gateDoc, file)
	}
}
