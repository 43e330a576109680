package scan

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"path/filepath"
	"regexp"
	"strings"

	yaml "go.yaml.in/yaml/v3"
	"sigs.k8s.io/kustomize/kyaml/filesys"

	"github.com/kube-sunset/sunset/internal/yamldoc"
)

// MaxKustomizeInput bounds the bytes one kustomization reads, all its
// files together. Kustomize holds every object it reads as a YAML node
// tree, which takes up to about 80 times the bytes it was read from.
const MaxKustomizeInput = 16 << 20

// confinedFS is the disk as kustomize may read it during a scan. Each file
// read must be a regular file, reached through no symlink that leaves the
// scanned directory, in documents within the bounds; all of them together
// at most MaxKustomizeInput. Unless allowRemote, a kustomization (or a
// builtin plugin's configuration) that names a remote resource, base,
// component or file is refused when it is read, which is before kustomize
// acts on any of it: kustomize fetches http(s) URLs and clones git
// repositories itself, through no file system, so the file that names
// them is where they can be stopped. Nothing is written.
type confinedFS struct {
	filesys.FileSystem
	scanned Root
	// widened, if set, is a directory holding scanned that kustomize may
	// read under too (--kustomize-root): where an overlay's ../../base is.
	widened     *Root
	allowRemote bool
	read        int64
	// refused is the first read refused, which kustomize may report as
	// something else (a missing kustomization).
	refused error
}

func (c *confinedFS) refuse(err error) error {
	if c.refused == nil {
		c.refused = err
	}
	return err
}

// resolve follows path's symlinks. A path under the scanned directory must
// stay in it; one above it (a base at ../../base when an overlay was given)
// only under the widened root, and stay in that. Anything else is
// refused: kubectl kustomize would build any directory of the machine
// that holds a kustomization, and a scan reads only what it was given.
func (c *confinedFS) resolve(path string) (string, fs.FileInfo, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return "", nil, err
	}
	root := c.scanned
	if !within(c.scanned.lexical, abs) {
		if c.widened == nil || !within(c.widened.lexical, abs) {
			return "", nil, c.refuse(c.outside(abs))
		}
		root = *c.widened
	}
	real, info, err := root.Resolve(abs)
	if reason, ok := IsSkip(err); ok {
		return "", nil, c.refuse(fmt.Errorf("%s: %s", c.rel(abs), reason))
	}
	return real, info, err
}

// outside says that abs is out of what kustomize may read, and what to do.
func (c *confinedFS) outside(abs string) error {
	if c.widened != nil {
		return fmt.Errorf("%s is outside --kustomize-root %s: a scan reads nothing outside it. Pass a --kustomize-root that holds both", abs, c.widened.lexical)
	}
	both := commonDir(c.scanned.lexical, abs)
	return fmt.Errorf("%s is outside the scanned directory %s: a scan reads nothing outside what it was given. "+
		"Scan %s (the directory that holds both), or pass --kustomize-root %s to let kustomizations read under it", abs, c.scanned.lexical, both, both)
}

// commonDir is the deepest directory that holds both a and b, absolute.
func commonDir(a, b string) string {
	for d := a; ; d = filepath.Dir(d) {
		if within(d, b) || d == filepath.Dir(d) {
			return d
		}
	}
}

func (c *confinedFS) rel(p string) string {
	if r, err := filepath.Rel(c.scanned.lexical, p); err == nil {
		return r
	}
	return p
}

func (c *confinedFS) CleanedAbs(path string) (filesys.ConfirmedDir, string, error) {
	if _, _, err := c.resolve(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return "", "", err
	}
	return c.FileSystem.CleanedAbs(path)
}

func (c *confinedFS) Open(path string) (filesys.File, error) {
	return nil, c.refuse(fmt.Errorf("%s: a scan reads files whole, through ReadFile", path))
}

func (c *confinedFS) ReadFile(path string) ([]byte, error) {
	real, info, err := c.resolve(path)
	if err != nil {
		return nil, err
	}
	if reason := irregular(info.Mode()); reason != "" {
		if info.IsDir() {
			// Kustomize tries a resource as a file before as a directory.
			return nil, fmt.Errorf("%s is a directory", path)
		}
		return nil, c.refuse(fmt.Errorf("%s: %s", c.rel(path), reason))
	}
	left := int64(MaxKustomizeInput) - c.read
	b, err := readRegular(real, left)
	var tooLarge *TooLargeError
	if errors.As(err, &tooLarge) {
		return nil, c.refuse(&TooLargeError{What: "what the kustomization reads", Limit: MaxKustomizeInput})
	}
	if err != nil {
		return nil, err
	}
	c.read += int64(len(b))
	if err := checkDocuments(b); err != nil {
		return nil, c.refuse(fmt.Errorf("%s: %w", c.rel(path), err))
	}
	if !c.allowRemote {
		if ref, err := remoteIn(b, isKustomization(filepath.Base(path))); err != nil {
			return nil, c.refuse(fmt.Errorf("%s: %w", c.rel(path), err))
		} else if ref != "" {
			return nil, c.refuse(fmt.Errorf("%s names the remote resource %q: a scan fetches nothing and runs no git unless --allow-remote is given", c.rel(path), ref))
		}
	}
	return b, nil
}

var errReadOnly = errors.New("a scan writes nothing")

func (c *confinedFS) Create(string) (filesys.File, error) { return nil, errReadOnly }
func (c *confinedFS) Mkdir(string) error                  { return errReadOnly }
func (c *confinedFS) MkdirAll(string) error               { return errReadOnly }
func (c *confinedFS) RemoveAll(string) error              { return errReadOnly }
func (c *confinedFS) WriteFile(string, []byte) error      { return errReadOnly }

// dataKeys hold data, never a path kustomize loads: a URL in an
// annotation, a literal or an inline patch is not a resource.
var dataKeys = map[string]bool{
	"metadata": true, "labels": true, "commonLabels": true, "annotations": true, "commonAnnotations": true,
	"literals": true, "patch": true, "images": true, "replicas": true, "namePrefix": true, "nameSuffix": true,
	"namespace": true, "vars": true, "source": true, "targets": true, "target": true, "select": true,
	"reject": true, "fieldSpecs": true, "options": true, "valuesInline": true, "buildMetadata": true,
	"sortOptions": true, "generatorOptions": true, "name": true, "behavior": true, "kind": true,
	"apiVersion": true, "releaseName": true, "value": true,
}

// remoteIn returns the first remote reference of a kustomization (every
// document of one, when kustomization) or of a builtin plugin's
// configuration in data: every string that kustomize could load, so every
// one outside dataKeys, is checked, so that a field kustomize adds later
// is checked too.
func remoteIn(data []byte, kustomization bool) (string, error) {
	if !kustomization && !bytes.Contains(data, []byte("builtin")) {
		return "", nil
	}
	var ref string
	err := eachDocument(data, func(doc []byte, _ int) error {
		var n yaml.Node
		if err := yaml.Unmarshal(doc, &n); err != nil || len(n.Content) == 0 {
			return nil // kustomize reports what it cannot parse
		}
		root := n.Content[0]
		if !kustomization && yamldoc.Scalar(yamldoc.MapValue(root, "apiVersion")) != "builtin" {
			return nil
		}
		ref = remoteRef(root, 0)
		if ref != "" {
			return errStop
		}
		return nil
	})
	if errors.Is(err, errStop) {
		err = nil
	}
	return ref, err
}

var errStop = errors.New("stop")

func remoteRef(n *yaml.Node, depth int) string {
	if n == nil || depth > 100 {
		return ""
	}
	switch n.Kind {
	case yaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			if dataKeys[n.Content[i].Value] {
				continue
			}
			if r := remoteRef(n.Content[i+1], depth+1); r != "" {
				return r
			}
		}
	case yaml.SequenceNode, yaml.DocumentNode:
		for _, c := range n.Content {
			if r := remoteRef(c, depth+1); r != "" {
				return r
			}
		}
	case yaml.ScalarNode:
		if isRemoteRef(n.Value) {
			return n.Value
		}
		if strings.Contains(n.Value, "\n") {
			// An inline generator or transformer configuration.
			var inline yaml.Node
			if yaml.Unmarshal([]byte(n.Value), &inline) == nil {
				return remoteRef(&inline, depth+1)
			}
		}
	}
	return ""
}

// scpUser is git's user@host:path form.
var scpUser = regexp.MustCompile(`^[a-zA-Z][a-zA-Z0-9-]*@`)

// isRemoteRef reports whether kustomize would fetch s (an http(s) URL) or
// clone it (a git URL: a scheme, git's user@host:path, github.com/...
// shorthand), or a key=s file source of a generator is one. It errs on the
// side of remote.
func isRemoteRef(s string) bool {
	for _, v := range []string{s, afterEquals(s)} {
		v = strings.TrimSpace(v)
		// kustomize strips git:: whatever its case (GIT::, Git::) and
		// matches schemes and github.com in any case too, so every check
		// below is of what follows it.
		if len(v) >= len("git::") && strings.EqualFold(v[:len("git::")], "git::") {
			v = v[len("git::"):]
		}
		l := strings.ToLower(v)
		for _, p := range []string{"http://", "https://", "ssh://", "file://", "git://", "github.com/", "github.com:"} {
			if strings.HasPrefix(l, p) {
				return true
			}
		}
		if scpUser.MatchString(v) {
			return true
		}
		if u, err := url.Parse(v); err == nil && (u.Scheme == "http" || u.Scheme == "https") {
			return true
		}
	}
	return false
}

func afterEquals(s string) string {
	if _, v, ok := strings.Cut(s, "="); ok {
		return v
	}
	return ""
}
