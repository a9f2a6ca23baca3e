package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"go/types"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
)

// Options say what to check.
type Options struct {
	GOOS, GOARCH string
	Tags         string   // comma-separated build tags
	Tests        bool     // include _test.go files
	Patterns     []string // package patterns, as for go list
	Dir          string   // where go list runs; empty is the current directory
}

// Result is what a check found.
type Result struct {
	Errors   []string // in this module's packages, "file:line:col: message"
	Packages int      // packages type-checked, dependencies included
	Checked  int      // this module's packages, bodies included
	Ignored  int      // errors in dependencies, dropped
}

// listedPackage is the part of `go list -json` output used here.
type listedPackage struct {
	ImportPath string
	Dir        string
	GoFiles    []string
	CgoFiles   []string
	ImportMap  map[string]string
	Standard   bool
	Module     *struct {
		Path      string
		Main      bool
		GoVersion string
	}
	Error *struct{ Err string }
}

// ours reports whether errors in p are reported: it belongs to the main
// module (test variants and generated test mains included).
func (p *listedPackage) ours() bool { return p.Module != nil && p.Module.Main }

// check lists the packages a GOOS/GOARCH build with cgo would compile and
// type-checks them in dependency order.
func check(o Options) (Result, error) {
	pkgs, err := list(o)
	if err != nil {
		return Result{}, err
	}
	sizes := types.SizesFor("gc", o.GOARCH)
	if sizes == nil {
		return Result{}, fmt.Errorf("unknown GOARCH %q", o.GOARCH)
	}
	var r Result
	fset := token.NewFileSet()
	done := map[string]*types.Package{}
	seen := map[string]bool{} // an error is reported once, not per test variant
	cwd, _ := os.Getwd()
	for _, p := range pkgs {
		if p.ImportPath == "unsafe" {
			done["unsafe"] = types.Unsafe
			continue
		}
		ours := p.ours()
		if p.Error != nil && ours {
			r.Errors = append(r.Errors, fmt.Sprintf("%s: %s", p.ImportPath, p.Error.Err))
			continue
		}
		var files []*ast.File
		for _, name := range slices.Concat(p.GoFiles, p.CgoFiles) {
			if !filepath.IsAbs(name) { // generated test mains are absolute
				name = filepath.Join(p.Dir, name)
			}
			f, err := parser.ParseFile(fset, name, nil, parser.SkipObjectResolution)
			if err != nil {
				if ours {
					r.Errors = append(r.Errors, err.Error())
				} else {
					r.Ignored++
				}
			}
			if f != nil {
				files = append(files, f)
			}
		}
		conf := types.Config{
			FakeImportC:      true,
			IgnoreFuncBodies: !ours,
			Sizes:            sizes,
			Importer:         importer{p: p, done: done},
			Error: func(err error) {
				if !ours {
					r.Ignored++
					return
				}
				msg := err.Error()
				if te, ok := err.(types.Error); ok {
					pos := te.Fset.Position(te.Pos)
					if rel, err := filepath.Rel(cwd, pos.Filename); err == nil && !strings.HasPrefix(rel, "..") {
						pos.Filename = rel
					}
					msg = fmt.Sprintf("%s: %s", pos, te.Msg)
				}
				if !seen[msg] {
					seen[msg] = true
					r.Errors = append(r.Errors, msg)
				}
			},
		}
		if p.Module != nil && p.Module.GoVersion != "" {
			conf.GoVersion = "go" + p.Module.GoVersion
		}
		pkg, _ := conf.Check(p.ImportPath, fset, files, nil)
		done[p.ImportPath] = pkg
		r.Packages++
		if ours {
			r.Checked++
		}
	}
	return r, nil
}

// list runs one go list over the patterns and their dependencies, which it
// prints in dependency order. Without -compiled or -export it never runs
// cgo or a C compiler.
func list(o Options) ([]*listedPackage, error) {
	args := []string{"list", "-e", "-deps", "-json=ImportPath,Dir,GoFiles,CgoFiles,ImportMap,Standard,Module,Error"}
	if o.Tests {
		args = append(args, "-test")
	}
	if o.Tags != "" {
		args = append(args, "-tags", o.Tags)
	}
	args = append(args, "--")
	args = append(args, o.Patterns...)
	cmd := exec.Command("go", args...)
	cmd.Dir = o.Dir
	cmd.Env = append(os.Environ(), "GOOS="+o.GOOS, "GOARCH="+o.GOARCH, "CGO_ENABLED=1")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("go list: %w\n%s", err, stderr.Bytes())
	}
	var pkgs []*listedPackage
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		p := new(listedPackage)
		if err := dec.Decode(p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			return nil, fmt.Errorf("go list output: %w", err)
		}
		pkgs = append(pkgs, p)
	}
	return pkgs, nil
}

// importer resolves p's imports to packages already checked.
type importer struct {
	p    *listedPackage
	done map[string]*types.Package
}

func (im importer) Import(path string) (*types.Package, error) {
	if mapped, ok := im.p.ImportMap[path]; ok {
		path = mapped
	}
	if pkg := im.done[path]; pkg != nil {
		return pkg, nil
	}
	return nil, fmt.Errorf("package %s not found among %s's dependencies", path, im.p.ImportPath)
}
