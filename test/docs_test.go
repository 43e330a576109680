package test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"unicode"

	"github.com/stretchr/testify/require"
)

// docsNaming are the documents that walk through Sunset's code by name
// and must keep naming code that exists. The README names config keys,
// JSON fields and alerts as code, which this test cannot tell apart.
var docsNaming = []string{"../docs/architecture.md"}

// codeSpan matches what a document writes as code.
var codeSpan = regexp.MustCompile("`([^`\n]+)`")

// goName matches a Go name as documents write it: Name, Type.Member or
// package.Name, perhaps followed by a call's arguments.
var goName = regexp.MustCompile(`^([A-Za-z_][A-Za-z0-9_]*)(?:\.([A-Za-z_][A-Za-z0-9_]*))?(?:\(.*\))?$`)

// Every function, method, type, field, constant and variable that
// docs/architecture.md names in code spans is declared in the code, so
// that the walk through the code stays true as the code moves.
func TestDocsNameCodeThatExists(t *testing.T) {
	declared := declaredNames(t, "..")
	missing := map[string][]string{}
	for _, doc := range docsNaming {
		raw, err := os.ReadFile(doc)
		require.NoError(t, err)
		for _, m := range codeSpan.FindAllStringSubmatch(string(raw), -1) {
			name, ok := checkedName(m[1])
			if ok && !declared[name] && !notSunsets[name] {
				missing[doc] = append(missing[doc], name)
			}
		}
	}
	require.Empty(t, missing, "documents name code that does not exist")
}

// checkedName is the Go name a code span names, and whether it is one the
// test can check: a camel-case or exported name, alone or after a type or
// package. Config keys, metric names, file names and values are left
// alone.
func checkedName(span string) (string, bool) {
	m := goName.FindStringSubmatch(span)
	if m == nil {
		return "", false
	}
	first, second := m[1], m[2]
	if second == "" {
		return first, hasUpper(first) && !allUpper(first)
	}
	if second == "go" || (!hasUpper(second) && !hasUpper(first)) {
		return "", false
	}
	return first + "." + second, true
}

func hasUpper(s string) bool { return strings.IndexFunc(s, unicode.IsUpper) >= 0 }

func allUpper(s string) bool { return strings.IndexFunc(s, unicode.IsLower) < 0 }

// declaredNames lists what the module's Go code declares, each as Name,
// package.Name and, for methods and fields, Type.Name.
func declaredNames(t *testing.T, root string) map[string]bool {
	t.Helper()
	names := map[string]bool{}
	add := func(pkg, owner, name string) {
		names[name] = true
		names[pkg+"."+name] = true
		if owner != "" {
			names[owner+"."+name] = true
		}
	}
	fset := token.NewFileSet()
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "e2e" || d.Name() == "bin" || strings.HasPrefix(d.Name(), ".")) && path != root {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		pkg := f.Name.Name
		for _, decl := range f.Decls {
			switch d := decl.(type) {
			case *ast.FuncDecl:
				add(pkg, receiverType(d), d.Name.Name)
			case *ast.GenDecl:
				for _, spec := range d.Specs {
					switch s := spec.(type) {
					case *ast.TypeSpec:
						add(pkg, "", s.Name.Name)
						addMembers(s, func(member string) { add(pkg, s.Name.Name, member) })
					case *ast.ValueSpec:
						for _, n := range s.Names {
							add(pkg, "", n.Name)
						}
					}
				}
			}
		}
		return nil
	})
	require.NoError(t, err)
	return names
}

func receiverType(d *ast.FuncDecl) string {
	if d.Recv == nil || len(d.Recv.List) == 0 {
		return ""
	}
	typ := d.Recv.List[0].Type
	if star, ok := typ.(*ast.StarExpr); ok {
		typ = star.X
	}
	if index, ok := typ.(*ast.IndexExpr); ok {
		typ = index.X
	}
	if index, ok := typ.(*ast.IndexListExpr); ok {
		typ = index.X
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
		if len(f.Names) == 0 {
			embedded := f.Type
			if star, ok := embedded.(*ast.StarExpr); ok {
				embedded = star.X
			}
			if sel, ok := embedded.(*ast.SelectorExpr); ok {
				add(sel.Sel.Name)
			} else if id, ok := embedded.(*ast.Ident); ok {
				add(id.Name)
			}
		}
	}
}

// notSunsets are names the documents write as code that are not Sunset's:
// the audit event's fields and stages, and other projects' names.
var notSunsets = map[string]bool{
	"auditID": true, "requestReceivedTimestamp": true, "stageTimestamp": true, "ResponseComplete": true, "Panic": true,
	"CommitOffsets": true, "badger.ErrTxnTooBig": true, "ExpiresAt": true, "metav1.Table": true, "Allow": true,
}
