package layout

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// maxFuncLines is the longest a function of the module's code may be, from
// its "func" line to its closing brace. Tests are not held to it.
const maxFuncLines = 120

// longFuncs are the functions allowed over maxFuncLines, keyed
// "path/from/root.go:Func" (methods "Type.Method"), each with its length
// today: it may shrink, never grow, and an entry is removed once its
// function fits.
var longFuncs = map[string]int{
	// A port of a known algorithm, kept line for line with its original.
	"sync/manifest/ignore.go:dowild": 166, // git's wildmatch.c
}

// TestFunctionLength holds every function of the module (outside tests and
// testdata) to maxFuncLines, save those in longFuncs, which may not grow.
func TestFunctionLength(t *testing.T) {
	lengths, err := funcLengths(root)
	if err != nil {
		t.Fatal(err)
	}
	var over []string
	for key, n := range lengths {
		allowed, listed := longFuncs[key]
		switch {
		case n > maxFuncLines && !listed:
			over = append(over, fmt.Sprintf("%s is %d lines, over %d: split it (a flags struct, a run function and a printer for a command)", key, n, maxFuncLines))
		case listed && n > allowed:
			over = append(over, fmt.Sprintf("%s is %d lines, longer than the %d longFuncs allows: it may only shrink", key, n, allowed))
		}
	}
	for key := range longFuncs {
		if n, ok := lengths[key]; !ok || n <= maxFuncLines {
			over = append(over, fmt.Sprintf("%s is in longFuncs but no longer over %d lines (or gone): remove its entry", key, maxFuncLines))
		}
	}
	slices.Sort(over)
	for _, s := range over {
		t.Error(s)
	}
}

// funcLengths returns the length in lines of every function with a body
// in the non-test Go files under dir, keyed as longFuncs is.
func funcLengths(dir string) (map[string]int, error) {
	out := map[string]int{}
	err := eachSource(dir, func(fset *token.FileSet, rel string, f *ast.File) {
		for _, decl := range f.Decls {
			fd, ok := decl.(*ast.FuncDecl)
			if !ok || fd.Body == nil {
				continue
			}
			out[rel+":"+funcName(fd)] = fset.Position(fd.End()).Line - fset.Position(fd.Pos()).Line + 1
		}
	})
	return out, err
}

// eachSource parses every non-test Go file under dir (outside testdata
// and hidden or _ folders) and gives it to do with its slash path from dir.
func eachSource(dir string, do func(fset *token.FileSet, rel string, f *ast.File)) error {
	fset := token.NewFileSet()
	return filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() {
			if path != dir && (name == "testdata" || strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_")) {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(dir, path)
		if err != nil {
			return err
		}
		do(fset, filepath.ToSlash(rel), f)
		return nil
	})
}

// funcName is "Func", or "Type.Method" for a method.
func funcName(fd *ast.FuncDecl) string {
	if fd.Recv == nil || len(fd.Recv.List) == 0 {
		return fd.Name.Name
	}
	t := fd.Recv.List[0].Type
	if s, ok := t.(*ast.StarExpr); ok {
		t = s.X
	}
	switch x := t.(type) {
	case *ast.IndexExpr:
		t = x.X
	case *ast.IndexListExpr:
		t = x.X
	}
	if id, ok := t.(*ast.Ident); ok {
		return id.Name + "." + fd.Name.Name
	}
	return fd.Name.Name
}
