package layout

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// deciders are the functions that decide what a run is (its sync mode,
// its limits, its verify step, the project's and the user's
// configuration), each with the folders that may call it. The planner
// (app/plan) decides a run once; the executor and the machine plumbing
// carry the plan out and must not decide again.
var deciders = map[string][]string{
	"app/sandbox.ParseSyncMode": {"app/plan"},
	"app/config.Load":           {"app/plan", "app/cli", "app/sandbox"},
	"app/config.LoadUser":       {"app/plan", "app/cli"},
	"app/config.Resolve":        {"app/plan", "app/cli"},
}

// executors are the folders that carry out a plan: no decider may be
// called there, whatever the table above allows.
var executors = []string{"app/pipeline", "app/machine/launch", "app/machine/vmhost", "app/machine/idle"}

// TestOneRunContract: the run's decisions are taken in app/plan only;
// nothing downstream re-reads a configuration or re-parses a sync mode.
func TestOneRunContract(t *testing.T) {
	err := eachSource(root, func(fset *token.FileSet, rel string, f *ast.File) {
		for _, msg := range redecisions(fset, rel, f) {
			t.Error(msg)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestPlantedRedecision plants a downstream parse of the sync mode and a
// re-read of airlock.toml in the executor: the contract rule reports both.
func TestPlantedRedecision(t *testing.T) {
	src := `package pipeline

import (
	cfg "github.com/airlock-dev/airlock/app/config"
	"github.com/airlock-dev/airlock/app/sandbox"
)

func (r *runner) mode() { _, _ = sandbox.ParseSyncMode(string(r.o.Sync)); _, _ = cfg.Load(r.project) }
`
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "app/pipeline/zz_planted.go", src, parser.SkipObjectResolution)
	if err != nil {
		t.Fatal(err)
	}
	got := redecisions(fset, "app/pipeline/zz_planted.go", f)
	if len(got) != 2 || !strings.Contains(got[0], "sandbox.ParseSyncMode") || !strings.Contains(got[1], "config.Load") {
		t.Errorf("planted re-decisions reported as %q", got)
	}
	// The planner may make both.
	if got := redecisions(fset, "app/plan/zz_planted.go", f); len(got) != 0 {
		t.Errorf("the planner's own decisions reported: %q", got)
	}
}

// redecisions are the calls of deciders in file rel (a path from the
// module's root) that its folder may not make.
func redecisions(fset *token.FileSet, rel string, f *ast.File) []string {
	dir := filepath.ToSlash(filepath.Dir(rel))
	names := map[string]string{} // local name → package folder
	for _, im := range f.Imports {
		path, err := strconv.Unquote(im.Path.Value)
		if err != nil || !strings.HasPrefix(path, module+"/") {
			continue
		}
		folder := strings.TrimPrefix(path, module+"/")
		name := folder[strings.LastIndex(folder, "/")+1:]
		if im.Name != nil {
			name = im.Name.Name
		}
		names[name] = folder
	}
	var out []string
	ast.Inspect(f, func(n ast.Node) bool {
		sel, ok := n.(*ast.SelectorExpr)
		if !ok {
			return true
		}
		x, ok := sel.X.(*ast.Ident)
		if !ok || names[x.Name] == "" {
			return true
		}
		fn := names[x.Name] + "." + sel.Sel.Name
		allowed, decides := deciders[fn]
		if !decides {
			return true
		}
		inExecutor := slices.ContainsFunc(executors, func(e string) bool { return under(dir, e) })
		if inExecutor || !slices.ContainsFunc(allowed, func(a string) bool { return under(dir, a) }) {
			short := strings.TrimPrefix(fn, "app/")
			out = append(out, fmt.Sprintf("%s: %s calls %s: a run is decided once, in app/plan (%s may call it), and carried out as planned", fset.Position(sel.Pos()), dir, short, strings.Join(allowed, ", ")))
		}
		return true
	})
	return out
}
