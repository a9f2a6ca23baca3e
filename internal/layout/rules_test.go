package layout

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
)

const (
	module = "github.com/airlock-dev/airlock"
	// root is the module's directory, seen from this package's.
	root = "../.."
	// tableFile holds the package table, under the heading tableHeading.
	tableFile    = "docs/architecture.md"
	tableHeading = "## Packages"
)

// The keywords a "must not import" cell may use besides backticked paths.
// docs/architecture.md describes them right above the table.
const (
	anythingInModule = "anything in the module"
	anythingNonStd   = "anything outside the standard library"
	directly         = "directly "
	except           = " except "
)

// pkg is what go list -json says of one package.
type pkg struct {
	ImportPath string
	Name       string
	Dir        string
	Standard   bool
	DepOnly    bool
	GoFiles    []string
	CgoFiles   []string
	Imports    []string
	Deps       []string
}

// graph is one go list -deps run: the packages it was asked for (own)
// and every package they depend on.
type graph struct {
	goos string
	pkgs map[string]*pkg
	own  []string // import paths, in go list's order
}

// goList lists patterns and everything they depend on, for goos, from the
// module's root. overlay, when not empty, is a go list -overlay file. cgo
// is on, as a real build for goos has it (vm/vz is darwin && cgo); go list
// runs no C compiler.
func goList(goos, overlay string, patterns ...string) (*graph, error) {
	args := []string{"list", "-deps", "-json=ImportPath,Name,Dir,Standard,DepOnly,GoFiles,CgoFiles,Imports,Deps"}
	if overlay != "" {
		args = append(args, "-overlay="+overlay)
	}
	cmd := exec.Command("go", append(args, patterns...)...)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "GOOS="+goos, "CGO_ENABLED=1")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("GOOS=%s go %s: %w\n%s", goos, strings.Join(cmd.Args[1:], " "), err, stderr.Bytes())
	}
	g := &graph{goos: goos, pkgs: map[string]*pkg{}}
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		p := new(pkg)
		if err := dec.Decode(p); err == io.EOF {
			break
		} else if err != nil {
			return nil, fmt.Errorf("GOOS=%s go list: decode: %w", goos, err)
		}
		g.pkgs[p.ImportPath] = p
		if !p.DepOnly {
			g.own = append(g.own, p.ImportPath)
		}
	}
	return g, nil
}

// rel is an import path as the table writes it: relative to the module
// for the module's packages, as is for others.
func rel(path string) string {
	if path == module {
		return "."
	}
	return strings.TrimPrefix(path, module+"/")
}

// A clause is one list of a "must not import" cell: what it names, less
// what follows "except". A direct clause looks at the package's own
// imports only; any other, at everything it depends on.
type clause struct {
	direct bool
	items  []item
	except []string // import paths, each with everything under it
}

// An item is one thing a clause forbids: an import path with everything
// under it, or one of the keywords.
type item struct {
	path   string
	module bool // anything in the module
	nonStd bool // anything outside the standard library
}

func under(path, prefix string) bool {
	return path == prefix || strings.HasPrefix(path, prefix+"/")
}

func (c clause) forbids(p *pkg) bool {
	for _, e := range c.except {
		if under(p.ImportPath, e) {
			return false
		}
	}
	for _, it := range c.items {
		switch {
		case it.module && under(p.ImportPath, module),
			it.nonStd && !p.Standard,
			it.path != "" && under(p.ImportPath, it.path):
			return true
		}
	}
	return false
}

// paths lists the import paths a clause names, to check that each names
// something that exists.
func (c clause) paths() []string {
	var ps []string
	for _, it := range c.items {
		if it.path != "" {
			ps = append(ps, it.path)
		}
	}
	return append(ps, c.except...)
}

// moduleFolders are the names of the module's top-level folders: a path
// in a cell that starts with one of them is the module's.
func moduleFolders() (map[string]bool, error) {
	entries, err := os.ReadDir(root)
	if err != nil {
		return nil, err
	}
	folders := map[string]bool{}
	for _, e := range entries {
		if e.IsDir() && !strings.HasPrefix(e.Name(), ".") {
			folders[e.Name()] = true
		}
	}
	return folders, nil
}

// parsePath turns a backticked path of a cell into an import path.
func parsePath(s string, folders map[string]bool) (string, error) {
	p, ok := strings.CutPrefix(s, "`")
	if ok {
		p, ok = strings.CutSuffix(p, "`")
	}
	if !ok || p == "" || strings.ContainsAny(p, "` \t") || strings.HasPrefix(p, "/") || strings.HasSuffix(p, "/") {
		return "", fmt.Errorf("%q is not a backticked import path", s)
	}
	first, _, _ := strings.Cut(p, "/")
	if folders[first] {
		return module + "/" + p, nil
	}
	return p, nil
}

// parseCell parses a "must not import" cell: lists separated by ";", each
// "[directly ]ITEM, ITEM, … [except `PATH`, `PATH`, …]", where an ITEM is
// a backticked path or one of the keywords.
func parseCell(cell string, folders map[string]bool) ([]clause, error) {
	var clauses []clause
	for part := range strings.SplitSeq(cell, ";") {
		part = strings.TrimSpace(part)
		var c clause
		part, c.direct = strings.CutPrefix(part, directly)
		list, exceptList, hasExcept := strings.Cut(part, except)
		for s := range strings.SplitSeq(list, ",") {
			s = strings.TrimSpace(s)
			switch s {
			case anythingInModule:
				c.items = append(c.items, item{module: true})
			case anythingNonStd:
				c.items = append(c.items, item{nonStd: true})
			default:
				p, err := parsePath(s, folders)
				if err != nil {
					return nil, fmt.Errorf("%w (an item is a backticked path, %q or %q)", err, anythingInModule, anythingNonStd)
				}
				c.items = append(c.items, item{path: p})
			}
		}
		if hasExcept {
			for s := range strings.SplitSeq(exceptList, ",") {
				p, err := parsePath(strings.TrimSpace(s), folders)
				if err != nil {
					return nil, fmt.Errorf("after %q: %w", strings.TrimSpace(except), err)
				}
				c.except = append(c.except, p)
			}
		}
		clauses = append(clauses, c)
	}
	return clauses, nil
}

// row is one row of the package table.
type row struct {
	line int    // in tableFile
	pkg  string // import path
	rule rule
}

// splitCells splits a table line on the "|" outside backticks.
func splitCells(line string) []string {
	line = strings.TrimSpace(line)
	line = strings.TrimPrefix(line, "|")
	line = strings.TrimSuffix(line, "|")
	var cells []string
	var cur strings.Builder
	code := false
	for _, r := range line {
		switch {
		case r == '`':
			code = !code
		case r == '|' && !code:
			cells = append(cells, strings.TrimSpace(cur.String()))
			cur.Reset()
			continue
		}
		cur.WriteRune(r)
	}
	return append(cells, strings.TrimSpace(cur.String()))
}

// readTable reads the package table of tableFile: the first table under
// tableHeading, with the columns package, owns and must not import.
// Every problem is reported.
func readTable(folders map[string]bool) ([]row, error) {
	f, err := os.Open(filepath.Join(root, tableFile))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var (
		rows    []row
		errs    []error
		n       int
		section bool
		header  bool
	)
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		n++
		line := sc.Text()
		if strings.HasPrefix(line, "## ") {
			if section && header {
				break
			}
			section = line == tableHeading
			continue
		}
		if !section {
			continue
		}
		if !strings.HasPrefix(line, "|") {
			if header {
				break // the table has ended
			}
			continue
		}
		cells := splitCells(line)
		if !header {
			if want := []string{"package", "owns", "must not import"}; !slices.Equal(cells, want) {
				return nil, fmt.Errorf("%s:%d: the table under %q must have the columns %q, has %q", tableFile, n, tableHeading, want, cells)
			}
			header = true
			continue
		}
		if strings.Trim(line, "|-: ") == "" {
			continue // the separator line
		}
		if len(cells) != 3 {
			errs = append(errs, fmt.Errorf("%s:%d: a row has 3 cells, this one %d", tableFile, n, len(cells)))
			continue
		}
		p, err := parsePath(cells[0], folders)
		if err == nil && !strings.HasPrefix(p, module+"/") {
			err = fmt.Errorf("%s is not a package of the module", cells[0])
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("%s:%d: package: %w", tableFile, n, err))
			continue
		}
		clauses, err := parseCell(cells[2], folders)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s:%d: %s: must not import: %w", tableFile, n, cells[0], err))
			continue
		}
		rows = append(rows, row{line: n, pkg: p, rule: rule{
			name:    "row " + rel(p),
			applies: func(path string) bool { return path == p },
			forbid:  clauses,
			why:     fmt.Sprintf("%s:%d: %s must not import %s", tableFile, n, cells[0], cells[2]),
		}})
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if !header {
		return nil, fmt.Errorf("%s: no table under %q", tableFile, tableHeading)
	}
	return rows, errors.Join(errs...)
}

// A rule forbids the packages it applies to some dependencies.
type rule struct {
	name    string // "row app/machine/launch", or a global rule's own
	applies func(path string) bool
	forbid  []clause
	why     string // how a violation names it
}

// global is a rule DESIGN.md states for the whole tree, checked on top of
// the table's rows.
type global struct {
	name string // what it says
	why  string
	from func(path string) bool
	cell string // in the table's syntax
}

func within(prefixes ...string) func(string) bool {
	return func(path string) bool {
		return slices.ContainsFunc(prefixes, func(pre string) bool { return under(path, module+"/"+pre) })
	}
}

func is(pkgs ...string) func(string) bool {
	return func(path string) bool { return slices.Contains(pkgs, rel(path)) }
}

func not(f func(string) bool) func(string) bool { return func(p string) bool { return !f(p) } }

func either(f, g func(string) bool) func(string) bool {
	return func(p string) bool { return f(p) || g(p) }
}

func everyPackage(string) bool { return true }

var globals = []global{
	{
		name: "nothing outside app imports app",
		why:  "app is the program; everything else is a library it is built from",
		from: not(within("app")),
		cell: "`app`",
	},
	{
		name: "only app/gui/... and main import fyne",
		why:  "the CLI is handed the desktop app by main (cli.WithGUI), so a build without cgo or a display has no fyne",
		from: not(either(within("app/gui"), is("app"))),
		cell: "`fyne.io/fyne`",
	},
	{
		name: "only vm/vz imports vz",
		why:  "vz is cgo and macOS only; every other package builds everywhere (they reach vz only through vm/vz)",
		from: not(is("vm/vz")),
		cell: "directly `github.com/Code-Hex/vz`",
	},
	{
		name: "guest never imports vm, fyne or vz",
		why:  "the guest side runs inside the VM (a static linux binary) or speaks to it, and knows nothing of hypervisors or the GUI",
		from: within("guest"),
		cell: "`vm`, `fyne.io/fyne`, `github.com/Code-Hex/vz`",
	},
	{
		name: "the guest agent and its binary never link testing",
		why:  "airlock-guest is PID 1 of every VM: no test flags, no test code",
		from: is("guest/agent", "guest/cmd/airlock-guest"),
		cell: "`testing`",
	},
	{
		name: "review and sync know nothing of vm, guest or fyne",
		why:  "they are tested without a VM or a display: sync/transfer works over a client it is handed",
		from: within("review", "sync"),
		cell: "`vm`, `guest`, `fyne.io/fyne`",
	},
	{
		name: "testkit, internal/layout and app/cli/clitest are for tests only",
		why:  "no program carries the test harness; testkit and app/cli/clitest (with its auditcheck) are themselves test harness (the kits of every package's tests and of app/cli's test packages)",
		from: not(within("testkit", "app/cli/clitest")),
		cell: "`testkit`, `internal/layout`, `app/cli/clitest`",
	},
	{
		name: "internal holds small utilities that import nothing of the module outside internal",
		why:  "vm, guest, sync and app build on them, so no arrow may run back up from them (the test kit that boots VMs is testkit)",
		from: within("internal"),
		cell: "anything in the module except `internal`",
	},
}

// globalRules parses the global rules' cells.
func globalRules(folders map[string]bool) ([]rule, error) {
	var rules []rule
	for _, g := range globals {
		clauses, err := parseCell(g.cell, folders)
		if err != nil {
			return nil, fmt.Errorf("global rule %q: %w", g.name, err)
		}
		rules = append(rules, rule{
			name:    g.name,
			applies: g.from,
			forbid:  clauses,
			why:     fmt.Sprintf("global rule %q (%s; internal/layout)", g.name, g.why),
		})
	}
	return rules, nil
}

// allRules is every rule: the table's rows, then the global rules.
func allRules() ([]row, []rule, error) {
	folders, err := moduleFolders()
	if err != nil {
		return nil, nil, err
	}
	rows, err := readTable(folders)
	if err != nil {
		return nil, nil, err
	}
	rules, err := globalRules(folders)
	if err != nil {
		return nil, nil, err
	}
	var all []rule
	for _, r := range rows {
		all = append(all, r.rule)
	}
	return rows, append(all, rules...), nil
}

// violation is a package depending on what a rule forbids it.
type violation struct {
	pkg   string
	dep   string
	chain []string // from pkg to dep, by imports
	rule  *rule
}

func (v violation) String() string {
	chain := make([]string, len(v.chain))
	for i, p := range v.chain {
		chain[i] = rel(p)
	}
	return fmt.Sprintf("%s depends on %s (%s), which breaks %s", rel(v.pkg), rel(v.dep), strings.Join(chain, " → "), v.rule.why)
}

// check runs rules over every package g was asked for. A dependency is
// reported where the chain of imports enters what a clause forbids, not
// again for each forbidden package beyond it.
func check(g *graph, rules []rule) []violation {
	var vs []violation
	for _, path := range g.own {
		p := g.pkgs[path]
		parent := g.paths(path)
		for i := range rules {
			r := &rules[i]
			if !r.applies(path) {
				continue
			}
			for _, c := range r.forbid {
				deps := p.Deps
				if c.direct {
					deps = p.Imports
				}
				for _, d := range deps {
					dp := g.pkgs[d]
					if dp == nil || !c.forbids(dp) {
						continue // "C" is no package
					}
					chain := []string{path, d}
					if !c.direct {
						chain = chainTo(parent, path, d)
					}
					if slices.ContainsFunc(chain[1:len(chain)-1], func(q string) bool { return g.pkgs[q] != nil && c.forbids(g.pkgs[q]) }) {
						continue // reported where the chain entered
					}
					vs = append(vs, violation{pkg: path, dep: d, chain: chain, rule: r})
				}
			}
		}
	}
	return vs
}

// paths walks the imports from start breadth first: the result maps each
// package reached to the one that imports it on a shortest chain.
func (g *graph) paths(start string) map[string]string {
	parent := map[string]string{start: ""}
	queue := []string{start}
	for len(queue) > 0 {
		cur := queue[0]
		queue = queue[1:]
		p := g.pkgs[cur]
		if p == nil {
			continue
		}
		for _, imp := range p.Imports {
			if _, seen := parent[imp]; !seen {
				parent[imp] = cur
				queue = append(queue, imp)
			}
		}
	}
	return parent
}

func chainTo(parent map[string]string, from, to string) []string {
	if _, ok := parent[to]; !ok {
		return []string{from, "…", to}
	}
	chain := []string{to}
	for cur := to; cur != from; {
		cur = parent[cur]
		chain = append(chain, cur)
	}
	slices.Reverse(chain)
	return chain
}
