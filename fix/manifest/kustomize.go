package manifest

import (
	"fmt"
	"path/filepath"
	"strings"

	yaml "go.yaml.in/yaml/v3"
	sigsyaml "sigs.k8s.io/yaml"

	"github.com/kube-sunset/sunset/convert"
	"github.com/kube-sunset/sunset/internal/yamldoc"
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
// components, and the patches in files, which move only where they hold
// no field the conversion changes, since a patch is a partial object. A
// patch target that names an API that moves is moved with the objects,
// unless some of them were left; a patch written inline is listed. It
// returns the files it read, its own and its bases'.
func (r *run) kustomization(root scan.Root, dir string) []string {
	// A base two overlays share (or one the walk reached first) is
	// rewritten once, but each overlay must still learn which of its
	// files left objects, or it would move a patch target away from an
	// object the base left.
	key := dir
	if real, err := filepath.EvalSymlinks(dir); err == nil {
		key = real
	}
	if files, ok := r.kdirs[key]; ok {
		return files
	}
	r.kdirs[key] = nil // a kustomization that includes itself reads nothing more
	files := r.kustomizationFiles(root, dir)
	r.kdirs[key] = files
	return files
}

func (r *run) kustomizationFiles(root scan.Root, dir string) []string {
	var kpath string
	for _, n := range kustomizationFiles {
		if hasFile(dir, n) {
			kpath = filepath.Join(dir, n)
			break
		}
	}
	data, real, ok := r.read(root, kpath)
	if !ok {
		return nil
	}
	var k kustomizationFile
	if err := sigsyaml.Unmarshal(data, &k); err != nil {
		r.skip(kpath, 0, fmt.Sprintf("does not parse (%v): its files are not rewritten", err))
		return nil
	}
	var files []string
	for _, list := range [][]string{k.Resources, k.Bases, k.Components} {
		for _, e := range list {
			files = append(files, r.kustomizeFile(root, dir, kpath, e, false)...)
		}
	}
	for _, p := range k.PatchesStrategicMerge {
		if strings.Contains(p, "\n") {
			r.inlinePatch(kpath, "patchesStrategicMerge", p)
			continue
		}
		files = append(files, r.kustomizeFile(root, dir, kpath, p, true)...)
	}
	for i, p := range k.Patches {
		if p.Path != "" {
			files = append(files, r.kustomizeFile(root, dir, kpath, p.Path, true)...)
		}
		if p.Patch != "" {
			r.inlinePatch(kpath, fmt.Sprintf("patches[%d]", i), p.Patch)
		}
	}
	out, changes := r.targets(kpath, data, files)
	r.keep(kpath, real, data, out, changes)
	return files
}

// targets moves the patch targets of a kustomization that name an API
// that moves, by its version (and group and kind, where written and
// changed), when every object of that API in files moved; otherwise it
// lists them.
func (r *run) targets(kpath string, data []byte, files []string) ([]byte, []Change) {
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil || len(doc.Content) == 0 {
		return data, nil
	}
	var texts []textEdit
	var changes []Change
	for _, field := range []string{"patches", "patchesJson6902"} {
		list := yamldoc.MapValue(doc.Content[0], field)
		if list == nil || list.Kind != yaml.SequenceNode {
			continue
		}
		for i, p := range list.Content {
			target := yamldoc.MapValue(p, "target")
			groupNode, versionNode, kindNode := yamldoc.MapValue(target, "group"), yamldoc.MapValue(target, "version"), yamldoc.MapValue(target, "kind")
			group, version, kind := yamldoc.Scalar(groupNode), yamldoc.Scalar(versionNode), yamldoc.Scalar(kindNode)
			if version == "" || kind == "" {
				continue
			}
			av := version
			if group != "" {
				av = group + "/" + version
			}
			c, ok := r.f.lookup(group, version, kind)
			if !ok || !c.HasReplacement() || !r.f.Moves(av, kind) {
				continue
			}
			what := fmt.Sprintf("%s[%d] targets %s %s, which moves to %s", field, i, av, kind, c.To)
			if c.Method == convert.Refused || r.leftAt(files, av+" "+kind) {
				r.skip(kpath, target.Line, what+", but not every object of it here was moved (see the list): the target is left; move them and it together by hand")
				continue
			}
			edits := []textEdit{{node: versionNode, value: c.To.Version}}
			if groupNode != nil && group != c.To.Group {
				edits = append(edits, textEdit{node: groupNode, value: c.To.Group})
			}
			if kind != c.To.Kind {
				edits = append(edits, textEdit{node: kindNode, value: c.To.Kind})
			}
			fits := groupNode != nil || c.To.Group == group
			for _, e := range edits {
				if _, _, ok := scalarSpan(data, e.node); !ok {
					fits = false
				}
			}
			if !fits {
				r.skip(kpath, target.Line, what+": set the target's group and version to the replacement's by hand, or the patch matches nothing")
				continue
			}
			texts = append(texts, edits...)
			changes = append(changes, Change{Kind: kind, Name: fmt.Sprintf("(the target of %s[%d])", field, i), Line: target.Line, From: av, To: c.To.APIVersion()})
		}
	}
	if len(texts) == 0 {
		return data, nil
	}
	out, err := applyTexts(data, texts)
	if err != nil {
		r.skip(kpath, 0, err.Error())
		return data, nil
	}
	return out, changes
}

// leftAt reports whether a file of files left an object of api (or
// every object it holds) where it was.
func (r *run) leftAt(files []string, api string) bool {
	for _, f := range files {
		for _, a := range r.left[f] {
			if a == api || a == anyAPI {
				return true
			}
		}
	}
	return false
}

// kustomizeFile rewrites one file or kustomization directory a
// kustomization names, when it is local and inside the scanned root, and
// returns the files it read; one it cannot read counts as leaving every
// object it holds.
func (r *run) kustomizeFile(root scan.Root, dir, kpath, entry string, patch bool) []string {
	if isRemote(entry) {
		r.skip(kpath, 0, fmt.Sprintf("names the remote resource %q: only local files are rewritten", entry))
		r.left[entry] = []string{anyAPI}
		return []string{entry}
	}
	p := filepath.Join(dir, entry)
	left := func(reason string) []string {
		r.skip(p, 0, reason)
		r.left[p] = []string{anyAPI}
		return []string{p}
	}
	abs, err := filepath.Abs(p)
	if err != nil {
		return left(err.Error())
	}
	if !within(root.Dir(), abs) {
		return left("outside the scanned directory; fix it from a directory that holds it")
	}
	real, info, err := root.Resolve(p)
	if reason, skipped := scan.IsSkip(err); skipped {
		return left(reason)
	}
	if err != nil {
		return left(err.Error())
	}
	if info.IsDir() {
		if !hasFile(real, kustomizationFiles...) {
			return left("a directory without a kustomization: kustomize cannot build it")
		}
		return r.kustomization(root, p)
	}
	r.manifest(root, p, patch)
	return []string{p}
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
