package apitest

import (
	"errors"
	"fmt"
	"go/ast"
	"go/build"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// modulePath is this module's path; its public packages are every package under the
// module root except those below internal/ and cmd/.
const modulePath = "github.com/shale-db/shale"

// notLibrary are public packages that are not part of the library a program links: the
// benchmark harness behind `shale bench` (its exported names serve the command and its
// JSON report). They are still checked for internal types in their API.
var notLibrary = []string{"benchmarks"}

// moduleRoot is the checkout holding this package (two levels up).
func moduleRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(root, "go.mod"))
	if err != nil || !strings.Contains(string(b), "module "+modulePath+"\n") {
		t.Fatalf("module root %s: no go.mod of %s (%v)", root, modulePath, err)
	}
	return root
}

// publicPackage is one public package's non-test files, parsed with comments.
type publicPackage struct {
	dir   string // relative to the module root, slash-separated
	name  string
	fset  *token.FileSet
	files map[string]*ast.File // by file name
}

// publicPackages parses every public package of the module (files the default build
// context selects, tests excluded).
func publicPackages(t *testing.T) []publicPackage {
	t.Helper()
	root := moduleRoot(t)
	var pkgs []publicPackage
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() {
			return nil
		}
		rel, _ := filepath.Rel(root, path)
		rel = filepath.ToSlash(rel)
		base := d.Name()
		if rel != "." && (strings.HasPrefix(base, ".") || strings.HasPrefix(base, "_") || base == "testdata" ||
			rel == "internal" || rel == "cmd") {
			return filepath.SkipDir
		}
		if rel != "." {
			if _, err := os.Stat(filepath.Join(path, "go.mod")); err == nil {
				return filepath.SkipDir // another module
			}
		}
		bp, err := build.Default.ImportDir(path, 0)
		if err != nil {
			var noGo *build.NoGoError
			if errors.As(err, &noGo) {
				return nil
			}
			return fmt.Errorf("%s: %w", rel, err)
		}
		if len(bp.GoFiles) == 0 || bp.Name == "main" {
			return nil
		}
		p := publicPackage{dir: rel, name: bp.Name, fset: token.NewFileSet(), files: map[string]*ast.File{}}
		for _, name := range bp.GoFiles {
			f, err := parser.ParseFile(p.fset, filepath.Join(path, name), nil, parser.ParseComments)
			if err != nil {
				return err
			}
			p.files[name] = f
		}
		pkgs = append(pkgs, p)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(pkgs) < 10 {
		t.Fatalf("found only %d public packages under %s", len(pkgs), root)
	}
	return pkgs
}

// sortedFiles returns p's files in name order, for stable reports.
func (p publicPackage) sortedFiles() []*ast.File {
	names := make([]string, 0, len(p.files))
	for n := range p.files {
		names = append(names, n)
	}
	slices.Sort(names)
	out := make([]*ast.File, len(names))
	for i, n := range names {
		out[i] = p.files[n]
	}
	return out
}

// receiverExported reports whether a method's receiver type is exported (methods of
// unexported types are not part of the API unless promoted, which this check ignores).
func receiverExported(fd *ast.FuncDecl) bool {
	if fd.Recv == nil || len(fd.Recv.List) == 0 {
		return true
	}
	t := fd.Recv.List[0].Type
	for {
		switch x := t.(type) {
		case *ast.StarExpr:
			t = x.X
			continue
		case *ast.IndexExpr:
			t = x.X
			continue
		case *ast.IndexListExpr:
			t = x.X
			continue
		case *ast.Ident:
			return x.IsExported()
		}
		return false
	}
}

func hasText(groups ...*ast.CommentGroup) bool {
	for _, g := range groups {
		if g != nil && strings.TrimSpace(g.Text()) != "" {
			return true
		}
	}
	return false
}

// TestPublicAPIDocumented: every exported name of every public library package (funcs,
// methods of exported types, types, constants, variables, fields of exported structs,
// methods of exported interfaces) has a doc comment, and every package has a package
// comment beginning "Package <name>" (issue 9, item 2: godoc is the reference). A
// constant or variable in a group may be covered by the group's comment; a field or
// constant by its line comment.
func TestPublicAPIDocumented(t *testing.T) {
	var missing []string
	checked := 0
	for _, p := range publicPackages(t) {
		if slices.Contains(notLibrary, p.dir) {
			continue
		}
		pos := func(n ast.Node) string {
			ps := p.fset.Position(n.Pos())
			return fmt.Sprintf("%s/%s:%d", p.dir, filepath.Base(ps.Filename), ps.Line)
		}
		pkgDoc := false
		for _, f := range p.sortedFiles() {
			if f.Doc != nil {
				if !strings.HasPrefix(f.Doc.Text(), "Package "+p.name+" ") {
					missing = append(missing, fmt.Sprintf("%s: package comment does not begin %q", pos(f.Doc), "Package "+p.name+" "))
				}
				pkgDoc = true
			}
			for _, decl := range f.Decls {
				switch d := decl.(type) {
				case *ast.FuncDecl:
					if !d.Name.IsExported() || !receiverExported(d) {
						continue
					}
					checked++
					if !hasText(d.Doc) {
						kind := "func"
						if d.Recv != nil {
							kind = "method"
						}
						missing = append(missing, fmt.Sprintf("%s: %s %s", pos(d), kind, d.Name))
					}
				case *ast.GenDecl:
					for _, spec := range d.Specs {
						switch s := spec.(type) {
						case *ast.TypeSpec:
							if !s.Name.IsExported() {
								continue
							}
							checked++
							if !hasText(s.Doc, d.Doc, s.Comment) {
								missing = append(missing, fmt.Sprintf("%s: type %s", pos(s), s.Name))
							}
							switch tt := s.Type.(type) {
							case *ast.StructType:
								for _, fl := range tt.Fields.List {
									for _, n := range fl.Names {
										if !n.IsExported() {
											continue
										}
										checked++
										if !hasText(fl.Doc, fl.Comment) {
											missing = append(missing, fmt.Sprintf("%s: field %s.%s", pos(n), s.Name, n))
										}
									}
								}
							case *ast.InterfaceType:
								for _, m := range tt.Methods.List {
									for _, n := range m.Names {
										if !n.IsExported() {
											continue
										}
										checked++
										if !hasText(m.Doc, m.Comment) {
											missing = append(missing, fmt.Sprintf("%s: method %s.%s", pos(n), s.Name, n))
										}
									}
								}
							}
						case *ast.ValueSpec:
							for _, n := range s.Names {
								if !n.IsExported() {
									continue
								}
								checked++
								if !hasText(s.Doc, s.Comment, d.Doc) {
									missing = append(missing, fmt.Sprintf("%s: %s %s", pos(n), d.Tok, n))
								}
							}
						}
					}
				}
			}
		}
		if !pkgDoc {
			missing = append(missing, fmt.Sprintf("%s: package %s has no package comment", p.dir, p.name))
		}
	}
	t.Logf("%d exported names checked", checked)
	if len(missing) > 0 {
		t.Errorf("%d exported names without a doc comment:\n\t%s", len(missing), strings.Join(missing, "\n\t"))
	}
}

// TestPublicAPINamesNoInternalTypes: no exported function signature, exported type
// definition (its exported fields and interface methods), or typed exported constant or
// variable of a public package mentions a type from a package under internal/. A program
// in another module cannot import those packages, so it could not name such a type (no
// composite literal, no variable of it, no errors.As target). Re-exporting one is done with
// an alias declaration (type X = internalpkg.X), which is allowed; values (var ErrX =
// internalpkg.ErrX) are too.
func TestPublicAPINamesNoInternalTypes(t *testing.T) {
	var leaks []string
	for _, p := range publicPackages(t) {
		for _, f := range p.sortedFiles() {
			internal := map[string]string{} // local import name -> path
			for _, im := range f.Imports {
				path, _ := strconv.Unquote(im.Path.Value)
				if !strings.HasPrefix(path, modulePath+"/internal/") {
					continue
				}
				name := path[strings.LastIndex(path, "/")+1:]
				if im.Name != nil {
					name = im.Name.Name
				}
				internal[name] = path
			}
			if len(internal) == 0 {
				continue
			}
			report := func(where string, expr ast.Node) {
				if expr == nil {
					return
				}
				ast.Inspect(expr, func(n ast.Node) bool {
					sel, ok := n.(*ast.SelectorExpr)
					if !ok {
						return true
					}
					if id, ok := sel.X.(*ast.Ident); ok {
						if path, ok := internal[id.Name]; ok {
							ps := p.fset.Position(sel.Pos())
							leaks = append(leaks, fmt.Sprintf("%s/%s:%d: %s names %s.%s (%s)",
								p.dir, filepath.Base(ps.Filename), ps.Line, where, id.Name, sel.Sel.Name, path))
						}
					}
					return true
				})
			}
			for _, decl := range f.Decls {
				switch d := decl.(type) {
				case *ast.FuncDecl:
					if d.Name.IsExported() && receiverExported(d) {
						report("func "+d.Name.Name, d.Type)
					}
				case *ast.GenDecl:
					for _, spec := range d.Specs {
						switch s := spec.(type) {
						case *ast.TypeSpec:
							if !s.Name.IsExported() || s.Assign.IsValid() {
								continue // unexported, or an alias: the sanctioned re-export
							}
							switch tt := s.Type.(type) {
							case *ast.StructType:
								for _, fl := range tt.Fields.List {
									if len(fl.Names) == 0 { // embedded: its exported names are promoted
										report("type "+s.Name.Name+" (embedded field)", fl.Type)
									}
									for _, n := range fl.Names {
										if n.IsExported() {
											report("field "+s.Name.Name+"."+n.Name, fl.Type)
										}
									}
								}
							case *ast.InterfaceType:
								for _, m := range tt.Methods.List {
									if len(m.Names) == 0 || m.Names[0].IsExported() {
										report("interface "+s.Name.Name, m.Type)
									}
								}
							default:
								report("type "+s.Name.Name, s.Type)
							}
						case *ast.ValueSpec:
							for _, n := range s.Names {
								if n.IsExported() {
									report(d.Tok.String()+" "+n.Name, s.Type)
								}
							}
						}
					}
				}
			}
		}
	}
	if len(leaks) > 0 {
		t.Errorf("%d exported declarations name internal types (alias them in a public package):\n\t%s", len(leaks), strings.Join(leaks, "\n\t"))
	}
}

// TestPublicPackagesHaveExamples: every public library package has at least one Example
// function in its tests (issue 9: an example per public package, runnable documentation).
func TestPublicPackagesHaveExamples(t *testing.T) {
	root := moduleRoot(t)
	for _, p := range publicPackages(t) {
		if slices.Contains(notLibrary, p.dir) {
			continue
		}
		files, err := filepath.Glob(filepath.Join(root, filepath.FromSlash(p.dir), "*_test.go"))
		if err != nil {
			t.Fatal(err)
		}
		found := false
		fset := token.NewFileSet()
		for _, name := range files {
			f, err := parser.ParseFile(fset, name, nil, parser.SkipObjectResolution)
			if err != nil {
				t.Fatal(err)
			}
			for _, d := range f.Decls {
				if fd, ok := d.(*ast.FuncDecl); ok && fd.Recv == nil && strings.HasPrefix(fd.Name.Name, "Example") {
					found = true
				}
			}
		}
		if !found {
			t.Errorf("package %s (%s) has no Example function", p.name, p.dir)
		}
	}
}
