package manifest

import (
	"fmt"
	"path/filepath"
	"strings"

	yaml "go.yaml.in/yaml/v3"
	sigsyaml "sigs.k8s.io/yaml"

	"github.com/kube-sunset/sunset/scan"
)

// kustomizationFile is what a fix reads of a kustomization: the files it
// takes objects and patches from.
type kustomizationFile struct {
	Resources             []string         `json:"resources"`
	Bases                 []string         `json:"bases"`
	Components            []string         `json:"components"`
	PatchesStrategicMerge []string         `json:"patchesStrategicMerge"`
	Patches               []kustomizePatch `json:"patches"`
	PatchesJSON6902       []kustomizePatch `json:"patchesJson6902"`
}

type kustomizePatch struct {
	Path   string `json:"path"`
	Patch  string `json:"patch"`
	Target *struct {
		Group   string `json:"group"`
		Version string `json:"version"`
		Kind    string `json:"kind"`
	} `json:"target"`
}

// kustomization rewrites the local files a kustomization lists: its
// resources (a directory among them is a kustomization itself), bases and
// components, and the patches in files, which move only where no field
// changes, since a patch is a partial object. A patch written inline, and
// a patch target naming an API that moves, are listed: kustomize would no
// longer apply them to the moved objects.
func (r *run) kustomization(root scan.Root, dir string) {
	if !r.firstDir(dir) {
		return
	}
	var kpath string
	for _, n := range kustomizationFiles {
		if hasFile(dir, n) {
			kpath = filepath.Join(dir, n)
			break
		}
	}
	data, _, ok := r.read(root, kpath)
	if !ok {
		return
	}
	var k kustomizationFile
	if err := sigsyaml.Unmarshal(data, &k); err != nil {
		r.skip(kpath, 0, fmt.Sprintf("does not parse (%v): its files are not rewritten", err))
		return
	}
	for _, list := range [][]string{k.Resources, k.Bases, k.Components} {
		for _, e := range list {
			r.kustomizeFile(root, dir, kpath, e, false)
		}
	}
	for _, p := range k.PatchesStrategicMerge {
		if strings.Contains(p, "\n") {
			r.inlinePatch(kpath, "patchesStrategicMerge", p)
			continue
		}
		r.kustomizeFile(root, dir, kpath, p, true)
	}
	for _, group := range []struct {
		field   string
		patches []kustomizePatch
	}{{"patches", k.Patches}, {"patchesJson6902", k.PatchesJSON6902}} {
		field := group.field
		for i, p := range group.patches {
			if p.Path != "" && field == "patches" {
				r.kustomizeFile(root, dir, kpath, p.Path, true)
			}
			if p.Patch != "" && field == "patches" {
				r.inlinePatch(kpath, fmt.Sprintf("patches[%d]", i), p.Patch)
			}
			if t := p.Target; t != nil && t.Version != "" && t.Kind != "" {
				av := t.Version
				if t.Group != "" {
					av = t.Group + "/" + t.Version
				}
				if c, ok := r.f.Conversions.Lookup(t.Group, t.Version, t.Kind); ok && c.HasReplacement() && r.f.Moves(av, t.Kind) {
					r.skip(kpath, 0, fmt.Sprintf("%s[%d] targets %s %s, which moves to %s: set the target's group and version to the replacement's by hand, or the patch matches nothing", field, i, av, t.Kind, c.To))
				}
			}
		}
	}
}

// kustomizeFile rewrites one file or kustomization directory a
// kustomization names, when it is local and inside the scanned root.
func (r *run) kustomizeFile(root scan.Root, dir, kpath, entry string, patch bool) {
	if isRemote(entry) {
		r.skip(kpath, 0, fmt.Sprintf("names the remote resource %q: only local files are rewritten", entry))
		return
	}
	p := filepath.Join(dir, entry)
	abs, err := filepath.Abs(p)
	if err != nil {
		r.skip(p, 0, err.Error())
		return
	}
	if !within(root.Dir(), abs) {
		r.skip(p, 0, "outside the scanned directory; fix it from a directory that holds it")
		return
	}
	real, info, err := root.Resolve(p)
	if reason, skipped := scan.IsSkip(err); skipped {
		r.skip(p, 0, reason)
		return
	}
	if err != nil {
		r.skip(p, 0, err.Error())
		return
	}
	if info.IsDir() {
		if hasFile(real, kustomizationFiles...) {
			r.kustomization(root, p)
		} else {
			r.skip(p, 0, "a directory without a kustomization: kustomize cannot build it")
		}
		return
	}
	r.manifest(root, p, patch)
}

// inlinePatch lists a patch written in the kustomization if it is of an
// API that moves.
func (r *run) inlinePatch(kpath, field, text string) {
	var head struct {
		APIVersion string `yaml:"apiVersion"`
		Kind       string `yaml:"kind"`
	}
	if yaml.Unmarshal([]byte(text), &head) != nil || head.APIVersion == "" || head.Kind == "" || !r.f.Moves(head.APIVersion, head.Kind) {
		return
	}
	r.skip(kpath, 0, fmt.Sprintf("the inline patch %s is of %s %s, which moves: a patch written in the kustomization is not rewritten; move it by hand", field, head.APIVersion, head.Kind))
}

func within(dir, p string) bool {
	rel, err := filepath.Rel(dir, p)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator)) && !filepath.IsAbs(rel)
}

// isRemote reports whether kustomize would fetch entry rather than read a
// local file: a URL, a git repository or the github.com shorthand.
func isRemote(entry string) bool {
	l := strings.ToLower(strings.TrimSpace(entry))
	return strings.Contains(l, "://") || strings.HasPrefix(l, "git::") || strings.HasPrefix(l, "github.com/") ||
		strings.HasPrefix(l, "github.com:") || strings.Contains(strings.SplitN(l, "/", 2)[0], "@")
}
