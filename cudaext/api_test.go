package cudaext

import (
	"bytes"
	"go/ast"
	"go/build/constraint"
	"go/parser"
	"go/printer"
	"go/token"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestNoCUDAMirrorsCUDA: the files of the nocuda build (CGO_ENABLED=0 or
// -tags nocuda) declare the same exported API as those of the CUDA build,
// with the same signatures and exported fields, so that code built against
// one builds against the other. It reads the sources, so it checks both
// builds whichever one runs it.
func TestNoCUDAMirrorsCUDA(t *testing.T) {
	cuda := exportedAPI(t, map[string]bool{"cgo": true})
	nocuda := exportedAPI(t, map[string]bool{"cgo": true, "nocuda": true})
	for k, v := range cuda {
		if w, ok := nocuda[k]; !ok {
			t.Errorf("%s is in the CUDA build only", k)
		} else if w != v {
			t.Errorf("%s differs: CUDA build %s, nocuda build %s", k, v, w)
		}
	}
	for k := range nocuda {
		if _, ok := cuda[k]; !ok {
			t.Errorf("%s is in the nocuda build only", k)
		}
	}
	if _, ok := cuda["func MemAlloc"]; !ok || len(cuda) < 50 {
		t.Fatalf("read %d declarations: the test no longer sees the API", len(cuda))
	}
}

// exportedAPI maps each exported declaration of the package's non-test
// files that build with tags to its printed shape.
func exportedAPI(t *testing.T, tags map[string]bool) map[string]string {
	t.Helper()
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	show := func(n any) string {
		var b bytes.Buffer
		if err := printer.Fprint(&b, fset, n); err != nil {
			t.Fatal(err)
		}
		return b.String()
	}
	fields := func(fl *ast.FieldList) string {
		var out []string
		if fl == nil {
			return ""
		}
		for _, f := range fl.List {
			for range max(1, len(f.Names)) {
				out = append(out, show(f.Type))
			}
		}
		return "(" + strings.Join(out, ", ") + ")"
	}
	api := map[string]string{}
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		src, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		f, err := parser.ParseFile(fset, name, src, parser.ParseComments)
		if err != nil {
			t.Fatal(err)
		}
		if !buildsWith(f, tags) {
			continue
		}
		for _, d := range f.Decls {
			switch d := d.(type) {
			case *ast.FuncDecl:
				if !d.Name.IsExported() {
					continue
				}
				key := "func " + d.Name.Name
				if d.Recv != nil {
					recv := show(d.Recv.List[0].Type)
					if !ast.IsExported(strings.TrimPrefix(recv, "*")) {
						continue
					}
					key = "func (" + recv + ") " + d.Name.Name
				}
				api[key] = fields(d.Type.Params) + " " + fields(d.Type.Results)
			case *ast.GenDecl:
				for _, s := range d.Specs {
					switch s := s.(type) {
					case *ast.TypeSpec:
						if !s.Name.IsExported() {
							continue
						}
						st, ok := s.Type.(*ast.StructType)
						if !ok {
							api["type "+s.Name.Name] = show(s.Type)
							continue
						}
						var exported []string
						for _, f := range st.Fields.List {
							for _, n := range f.Names {
								if n.IsExported() {
									exported = append(exported, n.Name+" "+show(f.Type))
								}
							}
						}
						slices.Sort(exported)
						api["type "+s.Name.Name] = "struct{" + strings.Join(exported, "; ") + "}"
					case *ast.ValueSpec:
						for _, n := range s.Names {
							if n.IsExported() {
								api[d.Tok.String()+" "+n.Name] = ""
							}
						}
					}
				}
			}
		}
	}
	return api
}

// buildsWith evaluates the file's //go:build line (none: always built).
func buildsWith(f *ast.File, tags map[string]bool) bool {
	for _, g := range f.Comments {
		if g.Pos() > f.Package {
			break
		}
		for _, c := range g.List {
			if constraint.IsGoBuild(c.Text) {
				x, err := constraint.Parse(c.Text)
				if err != nil {
					return false
				}
				return x.Eval(func(tag string) bool { return tags[tag] })
			}
		}
	}
	return true
}
