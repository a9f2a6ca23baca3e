package layout

import (
	"bytes"
	"encoding/json"
	"io"
	"os/exec"
	"strings"
	"testing"
)

const module = "github.com/airlock-dev/airlock"

type pkg struct {
	ImportPath string
	Name       string
	Doc        string
	Deps       []string
	Imports    []string
	GoFiles    []string
}

// listPackages runs go list over the whole module for goos.
func listPackages(t *testing.T, goos string) []pkg {
	t.Helper()
	cmd := exec.Command("go", "list", "-json", module+"/...")
	cmd.Dir = "../.."
	// With cgo on, as a real build for goos has it: vm/vz is darwin && cgo.
	// go list runs no C compiler without -compiled.
	cmd.Env = append(cmd.Environ(), "GOOS="+goos, "CGO_ENABLED=1")
	out, err := cmd.Output()
	if err != nil {
		var stderr string
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = string(ee.Stderr)
		}
		t.Fatalf("go list (%s): %v\n%s", goos, err, stderr)
	}
	var pkgs []pkg
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var p pkg
		if err := dec.Decode(&p); err == io.EOF {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		pkgs = append(pkgs, p)
	}
	return pkgs
}

func TestPackageDocs(t *testing.T) {
	seen := map[string]bool{}
	for _, p := range append(listPackages(t, "linux"), listPackages(t, "darwin")...) {
		if len(p.GoFiles) == 0 || seen[p.ImportPath] {
			continue
		}
		seen[p.ImportPath] = true
		if p.Name == "main" {
			if !strings.HasPrefix(p.Doc, "Command ") {
				t.Errorf("%s: main package needs a doc comment starting \"Command …\", got %q", p.ImportPath, p.Doc)
			}
			continue
		}
		if !strings.HasPrefix(p.Doc, "Package "+p.Name+" ") {
			t.Errorf("%s: needs a doc comment starting \"Package %s …\" (what it owns, what it must not import), got %q", p.ImportPath, p.Name, p.Doc)
		}
	}
}

// rule forbids packages matching from from depending on anything under to;
// a direct rule forbids only importing it (depending through an allowed
// package is fine).
type rule struct {
	from   func(string) bool
	to     []string
	reason string
	direct bool
}

func under(prefixes ...string) func(string) bool {
	return func(p string) bool {
		for _, pre := range prefixes {
			full := module + "/" + pre
			if p == full || strings.HasPrefix(p, full+"/") {
				return true
			}
		}
		return false
	}
}

func not(f func(string) bool) func(string) bool { return func(p string) bool { return !f(p) } }

func either(f, g func(string) bool) func(string) bool {
	return func(p string) bool { return f(p) || g(p) }
}

func exactly(pkg string) func(string) bool { return func(p string) bool { return p == module+"/"+pkg } }

var rules = []rule{
	{under("vm", "guest", "sync", "review", "internal", "packaging"), []string{module + "/app"}, "nothing imports app", false},
	{under("packaging"), []string{module + "/guest", module + "/sync", module + "/review", "fyne.io/fyne", "github.com/Code-Hex/vz"}, "packaging packages the program and is not part of it", false},
	{under("guest"), []string{module + "/vm", "fyne.io/fyne", "github.com/Code-Hex/vz"}, "guest never imports vm, fyne or vz", false},
	{under("guest/agent", "guest/cmd"), []string{"testing"}, "the guest agent must not link the testing package", false},
	{under("review", "sync"), []string{module + "/vm", module + "/guest", "fyne.io/fyne"}, "review and sync know nothing of VMs, the guest or the GUI", false},
	{not(either(under("app/gui"), exactly("app"))), []string{"fyne.io/fyne"}, "only the GUI (and main, which hands it to the CLI) imports fyne", false},
	{under("app/gui"), []string{module + "/app/cli", module + "/vm/qemu", module + "/vm/vz", "github.com/Code-Hex/vz"}, "the GUI is handed to the CLI by main and boots machines only through the function it is given", false},
	{not(under("vm/vz")), []string{"github.com/Code-Hex/vz"}, "only vm/vz imports vz", true},
	{under("vm"), []string{module + "/guest", module + "/sync", module + "/review"}, "vm knows nothing of the guest agent, sync or review", false},
	{under("app/egress"), []string{module + "/vm", module + "/guest", module + "/app/sandbox", module + "/app/config", module + "/app/cli", "fyne.io/fyne", "github.com/Code-Hex/vz"}, "the egress proxy is handed its policy and never touches VMs, the guest or the GUI", false},
	{under("app/config"), []string{module + "/vm", module + "/guest", module + "/sync", module + "/review", module + "/app/sandbox", module + "/app/cli", "fyne.io/fyne"}, "configuration is plain data", false},
	{under("app/agent"), []string{module + "/vm", module + "/guest", module + "/sync", module + "/review", module + "/app/sandbox", module + "/app/cli", module + "/app/launch", "fyne.io/fyne"}, "agent presets are plain data", false},
	{under("internal/ctxio", "internal/bytesize"), []string{module}, "small focused packages that any package may import import nothing of Airlock's", false},
	{under("app/vmhost"), []string{module + "/vm/qemu", module + "/vm/vz", module + "/app/cli", module + "/app/launch", module + "/app/sandbox", "fyne.io/fyne"},
		"the VM supervisor is handed its backend and sits below launch, sandbox and the CLI", false},
}

func TestImportRules(t *testing.T) {
	for _, goos := range []string{"linux", "darwin"} {
		t.Run(goos, func(t *testing.T) {
			for _, p := range listPackages(t, goos) {
				for _, r := range rules {
					if !r.from(p.ImportPath) {
						continue
					}
					deps := p.Deps
					if r.direct {
						deps = p.Imports
					}
					for _, d := range deps {
						for _, bad := range r.to {
							if d == bad || strings.HasPrefix(d, bad+"/") {
								t.Errorf("%s depends on %s: %s", p.ImportPath, d, r.reason)
							}
						}
					}
				}
			}
		})
	}
}
