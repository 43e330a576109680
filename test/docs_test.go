package test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"unicode"

	"github.com/stretchr/testify/require"
)

// docsNaming are the documents that walk through Sunset's code by name,
// each with how many names it checks at least, so that a change to the
// test that stopped it reading names fails rather than passes. The README
// writes config keys, JSON fields and alerts as code, which this test
// cannot tell from Go names.
var docsNaming = map[string]int{"../docs/architecture.md": 200}

// codeSpan matches what a document writes as code.
var codeSpan = regexp.MustCompile("`([^`\n]+)`")

// goName matches a Go name as documents write it: Name, Type.Member,
// package.Name or package.Type.Member, perhaps followed by a call's
// arguments.
var goName = regexp.MustCompile(`^([A-Za-z_]\w*(?:\.[A-Za-z_]\w*){0,2})(?:\(.*\))?$`)

// notSunsets are words the document writes as code that are not Sunset's
// Go names: the audit format's fields and stages, other projects' names,
// HTTP, config values and result labels.
var notSunsets = map[string]bool{
	"auditID": true, "requestReceivedTimestamp": true, "stageTimestamp": true, "objectRef": true,
	"ResponseComplete": true, "Panic": true,
	"CommitOffsets": true, "badger.ErrTxnTooBig": true, "ExpiresAt": true, "metav1.Table": true, "promhttp": true,
	"Allow": true,
	// A config key, not the package scan's: the chart's values (scan.enabled,
	// scan.schedule) share its prefix, so scan.* is not a key pattern.
	"scan.configMap": true,
	// Config keys too; the chart's values (gate.failurePolicy) share gate.
	"gate.staleAfter": true, "gate.whenUnknown": true, "gate.cleanFor": true, "gate.retryAfter": true,
}

// Every function, method, type, field, constant and variable that
// docs/architecture.md names in code spans is declared in the code, where
// it says: a method on its type, a name in its package. So the walk
// through the code stays true as the code moves.
func TestDocsNameCodeThatExists(t *testing.T) {
	code := declaredNames(t, "..")
	missing := map[string][]string{}
	for doc, least := range docsNaming {
		raw, err := os.ReadFile(doc)
		require.NoError(t, err)
		checked := 0
		for _, m := range codeSpan.FindAllStringSubmatch(string(raw), -1) {
			name, ok := code.checkable(m[1])
			if !ok || notSunsets[name] {
				continue
			}
			checked++
			if !code.declares(name) {
				missing[doc] = append(missing[doc], name)
			}
		}
		t.Logf("%s: %d names checked against the code", doc, checked)
		require.GreaterOrEqual(t, checked, least, "%s: names checked", doc)
	}
	// The other pages write config keys, JSON fields and words as code
	// too, so only what is plainly Go is checked there: a name after one
	// of Sunset's packages, with a capital (countkey.Request, api.Handler).
	checked := 0
	for path, page := range docPages(t) {
		if _, walked := docsNaming["../"+path]; walked {
			continue
		}
		for _, m := range codeSpan.FindAllStringSubmatch(page, -1) {
			name, ok := code.checkable(m[1])
			parts := strings.Split(name, ".")
			if !ok || notSunsets[name] || len(parts) < 2 || !code.packages[parts[0]] || !hasUpper(name) || configKey.MatchString(name) {
				continue
			}
			checked++
			if !code.declares(name) {
				missing[path] = append(missing[path], name)
			}
		}
		t.Logf("%s: %d names checked against the code", path, checked)
	}
	require.GreaterOrEqual(t, checked, 10, "names checked in the other pages")
	require.Empty(t, missing, "documents name code that does not exist")
}

// declared is what the module's Go code declares.
type declared struct {
	// packages and types are the names of packages and of types.
	packages, types map[string]bool
	// values are the code's string literals: result labels, metric and
	// component names, which documents write as code too.
	values map[string]bool
	// names holds each declaration as Name; each top-level one as
	// package.Name; each method and field as Type.Name and
	// package.Type.Name.
	names map[string]bool
}

func (d declared) declares(name string) bool { return d.names[name] }

// addValue notes a string the code holds, and each part of it as a path:
// "/apis/sunset.dev/v1/upgradechecks" holds "upgradechecks".
func (d declared) addValue(v string) {
	d.values[v] = true
	for part := range strings.SplitSeq(v, "/") {
		d.values[part] = true
	}
}

// checkable is the Go name a code span names, and whether it is one to
// check: a lone name, unless it is a package or a string the code holds
// (a metric, a label value, a path); a name after a package or a type,
// unless it is a config key; a dotted name with a capital that is neither
// (a missing type or package). File names are not names.
func (d declared) checkable(span string) (string, bool) {
	m := goName.FindStringSubmatch(span)
	if m == nil {
		return "", false
	}
	name := m[1]
	parts := strings.Split(name, ".")
	switch len(parts) {
	case 1:
		if !hasUpper(name) {
			return name, !d.packages[name] && !d.values[name]
		}
		return name, !allUpper(name)
	case 2:
		if parts[1] == "go" || parts[1] == "md" {
			return "", false
		}
		if !hasUpper(name) && d.values[parts[1]] {
			return "", false // a config key, such as kafka.forward
		}
		return name, d.packages[parts[0]] || d.types[parts[0]] || hasUpper(name)
	default:
		return name, d.packages[parts[0]] && d.types[parts[1]]
	}
}

func hasUpper(s string) bool { return strings.IndexFunc(s, unicode.IsUpper) >= 0 }

func allUpper(s string) bool { return strings.IndexFunc(s, unicode.IsLower) < 0 }

// declaredNames reads the declarations of the module's Go code, tests and
// the e2e module left out.
func declaredNames(t *testing.T, root string) declared {
	t.Helper()
	d := declared{packages: map[string]bool{}, types: map[string]bool{}, values: map[string]bool{}, names: map[string]bool{}}
	add := func(pkg, owner, name string) {
		d.names[name] = true
		if owner == "" {
			d.names[pkg+"."+name] = true
			return
		}
		d.names[owner+"."+name] = true
		d.names[pkg+"."+owner+"."+name] = true
	}
	fset := token.NewFileSet()
	err := filepath.WalkDir(root, func(path string, entry fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if entry.IsDir() && path != root && (entry.Name() == "e2e" || entry.Name() == "bin" || strings.HasPrefix(entry.Name(), ".")) {
			return filepath.SkipDir
		}
		if entry.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		pkg := f.Name.Name
		d.packages[pkg] = true
		ast.Inspect(f, func(n ast.Node) bool {
			if field, ok := n.(*ast.Field); ok && field.Tag != nil {
				tag, _ := strconv.Unquote(field.Tag.Value)
				key, _, _ := strings.Cut(reflect.StructTag(tag).Get("mapstructure"), ",")
				d.addValue(key)
				return false
			}
			if lit, ok := n.(*ast.BasicLit); ok && lit.Kind == token.STRING {
				if v, err := strconv.Unquote(lit.Value); err == nil {
					d.addValue(v)
				}
			}
			return true
		})
		for _, decl := range f.Decls {
			switch decl := decl.(type) {
			case *ast.FuncDecl:
				add(pkg, receiverType(decl), decl.Name.Name)
			case *ast.GenDecl:
				for _, spec := range decl.Specs {
					switch spec := spec.(type) {
					case *ast.TypeSpec:
						d.types[spec.Name.Name] = true
						add(pkg, "", spec.Name.Name)
						addMembers(spec, func(member string) { add(pkg, spec.Name.Name, member) })
					case *ast.ValueSpec:
						for _, n := range spec.Names {
							add(pkg, "", n.Name)
						}
					}
				}
			}
		}
		return nil
	})
	require.NoError(t, err)
	return d
}

func receiverType(d *ast.FuncDecl) string {
	if d.Recv == nil || len(d.Recv.List) == 0 {
		return ""
	}
	typ := d.Recv.List[0].Type
	if star, ok := typ.(*ast.StarExpr); ok {
		typ = star.X
	}
	switch generic := typ.(type) {
	case *ast.IndexExpr:
		typ = generic.X
	case *ast.IndexListExpr:
		typ = generic.X
	}
	if id, ok := typ.(*ast.Ident); ok {
		return id.Name
	}
	return ""
}

// addMembers adds the fields of a struct type and the methods of an
// interface type, embedded ones by their type's name.
func addMembers(s *ast.TypeSpec, add func(string)) {
	var fields *ast.FieldList
	switch typ := s.Type.(type) {
	case *ast.StructType:
		fields = typ.Fields
	case *ast.InterfaceType:
		fields = typ.Methods
	default:
		return
	}
	for _, f := range fields.List {
		for _, n := range f.Names {
			add(n.Name)
		}
		if len(f.Names) > 0 {
			continue
		}
		embedded := f.Type
		if star, ok := embedded.(*ast.StarExpr); ok {
			embedded = star.X
		}
		switch e := embedded.(type) {
		case *ast.SelectorExpr:
			add(e.Sel.Name)
		case *ast.Ident:
			add(e.Name)
		}
	}
}
