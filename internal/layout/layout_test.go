package layout

import (
	"go/parser"
	"go/token"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// goosList are the operating systems Airlock builds for; a package that
// builds for one of them only (vm/vz) has its row all the same.
var goosList = []string{"linux", "darwin"}

func listAll(t *testing.T) []*graph {
	t.Helper()
	var gs []*graph
	for _, goos := range goosList {
		g, err := goList(goos, "", "./...")
		if err != nil {
			t.Fatal(err) // never a skip: the rules hold only if they are checked
		}
		gs = append(gs, g)
	}
	return gs
}

// mustNotImport is what every package comment says, in its own words,
// next to what the package owns: "It must not import …".
const mustNotImport = "must not import"

// TestPackageDocs checks that every package has a package comment
// ("// Package x …", or "// Command x …" for a main package) that says
// what it must not import (it contains mustNotImport).
func TestPackageDocs(t *testing.T) {
	seen := map[string]bool{}
	for _, g := range listAll(t) {
		for _, path := range g.own {
			p := g.pkgs[path]
			if seen[path] {
				continue
			}
			seen[path] = true
			doc, err := packageDoc(p)
			if err != nil {
				t.Errorf("%s: %v", rel(path), err)
				continue
			}
			want := "Package " + p.Name + " "
			if p.Name == "main" {
				want = "Command "
			}
			if !strings.HasPrefix(doc, want) {
				t.Errorf("%s: needs a package comment starting %q (what it owns, what it must not import), got %q", rel(path), want+"…", firstLine(doc))
				continue
			}
			if !strings.Contains(strings.Join(strings.Fields(doc), " "), mustNotImport) {
				t.Errorf("%s: its package comment must say what the package %s (as its row in %s does)", rel(path), mustNotImport, tableFile)
			}
		}
	}
}

// packageDoc is the package comment of p: every file's, joined (go list's
// Doc is only the first sentence).
func packageDoc(p *pkg) (string, error) {
	var docs []string
	fset := token.NewFileSet()
	for _, name := range slices.Concat(p.GoFiles, p.CgoFiles) {
		f, err := parser.ParseFile(fset, filepath.Join(p.Dir, name), nil, parser.PackageClauseOnly|parser.ParseComments)
		if err != nil {
			return "", err
		}
		if f.Doc != nil {
			docs = append(docs, f.Doc.Text())
		}
	}
	return strings.Join(docs, "\n"), nil
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}

// TestImportRules checks that the package table has one row per package,
// for linux and darwin, and that no package depends on what its row or a
// global rule forbids.
func TestImportRules(t *testing.T) {
	rows, rules, err := allRules()
	if err != nil {
		t.Fatal(err)
	}
	graphs := listAll(t)

	// One row per package, no row for what is no package.
	exists := map[string]bool{} // every package of every graph, the module's or not
	own := map[string]bool{}
	for _, g := range graphs {
		for path := range g.pkgs {
			exists[path] = true
		}
		for _, path := range g.own {
			own[path] = true
		}
	}
	known := slices.Collect(maps.Keys(exists))
	hasRow := map[string]int{}
	for _, r := range rows {
		if line, dup := hasRow[r.pkg]; dup {
			t.Errorf("%s:%d: a second row for `%s` (the first is line %d)", tableFile, r.line, rel(r.pkg), line)
		}
		hasRow[r.pkg] = r.line
		if !own[r.pkg] {
			t.Errorf("%s:%d: the row `%s` names no package of the module (GOOS=linux or darwin); remove the row or fix its path", tableFile, r.line, rel(r.pkg))
		}
		for _, c := range r.rule.forbid {
			for _, p := range c.paths() {
				if !slices.ContainsFunc(known, func(q string) bool { return under(q, p) }) {
					t.Errorf("%s:%d: the row `%s` forbids `%s`, which is no package the module's build sees (misspelt?)", tableFile, r.line, rel(r.pkg), rel(p))
				}
			}
		}
	}
	for _, g := range graphs {
		for _, path := range g.own {
			if _, ok := hasRow[path]; !ok {
				hasRow[path] = 0
				t.Errorf("%s (GOOS=%s) has no row in the table under %q of %s; add one:\n| `%s` | what it owns | what it must not import (the syntax is above the table) |\nand say the same in its package comment", rel(path), g.goos, tableHeading, tableFile, rel(path))
			}
		}
	}

	for _, g := range graphs {
		t.Run(g.goos, func(t *testing.T) {
			for _, v := range check(g, rules) {
				t.Error(v)
			}
		})
	}
}

// TestGlobalRules checks that the global rules parse.
func TestGlobalRules(t *testing.T) {
	folders, err := moduleFolders()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := globalRules(folders); err != nil {
		t.Fatal(err)
	}
}

// TestParseCell pins the syntax of the "must not import" cells.
func TestParseCell(t *testing.T) {
	folders := map[string]bool{"app": true, "vm": true, "sync": true}
	m := func(p string) string { return module + "/" + p }
	tests := []struct {
		cell    string
		want    []clause
		wantErr bool
	}{
		{cell: "`vm/qemu`, `fyne.io/fyne`, `testing`", want: []clause{{items: []item{{path: m("vm/qemu")}, {path: "fyne.io/fyne"}, {path: "testing"}}}}},
		{cell: "anything in the module except `sync/manifest`, `app/egress`", want: []clause{{items: []item{{module: true}}, except: []string{m("sync/manifest"), m("app/egress")}}}},
		{cell: "anything outside the standard library", want: []clause{{items: []item{{nonStd: true}}}}},
		{cell: "`fyne.io/fyne`; directly anything in the module except `app/cli`", want: []clause{
			{items: []item{{path: "fyne.io/fyne"}}},
			{direct: true, items: []item{{module: true}}, except: []string{m("app/cli")}},
		}},
		{cell: "vm, fyne", wantErr: true},
		{cell: "—", wantErr: true},
		{cell: "`vm/`", wantErr: true},
		{cell: "`vm` except", wantErr: true},
		{cell: "", wantErr: true},
	}
	for _, tt := range tests {
		got, err := parseCell(tt.cell, folders)
		if tt.wantErr {
			if err == nil {
				t.Errorf("parseCell(%q) = %+v, want an error", tt.cell, got)
			}
			continue
		}
		if err != nil {
			t.Errorf("parseCell(%q): %v", tt.cell, err)
			continue
		}
		if diff := cmp.Diff(tt.want, got, cmp.AllowUnexported(clause{}, item{})); diff != "" {
			t.Errorf("parseCell(%q) (-want +got):\n%s", tt.cell, diff)
		}
	}
}
