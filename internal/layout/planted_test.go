package layout

import (
	"encoding/json"
	"fmt"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestPlantedImports plants a forbidden import in one package of a scratch
// copy of the module (an overlay adding one file, zz_planted.go, that
// imports it) and checks that the rules catch it against the package's own
// rule: its row, or a global rule that applies to it. Only the planted
// package is checked, so another package's transitive rule cannot stand in.
func TestPlantedImports(t *testing.T) {
	_, rules, err := allRules()
	if err != nil {
		t.Fatal(err)
	}
	folders, err := moduleFolders()
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		pkg    string // where the import is planted
		plant  string // what it imports, written as in the table
		broken string // the rule that must report it; "" when none may
	}{
		{"app/machine/launch", "`vm/qemu`", "row app/machine/launch"},
		{"vm/vz/vzconfig", "`github.com/Code-Hex/vz/v3`", "row vm/vz/vzconfig"},
		{"app/egress", "`review`", "row app/egress"},
		{"app/home", "`vm`", "row app/home"},
		{"review", "`vm`", "row review"},
		{"review", "`vm/image`", "review and sync know nothing of vm, guest or fyne"},
		{"guest/agent", "`testing`", "row guest/agent"},
		{"guest/agent", "`testing`", "the guest agent and its binary never link testing"},
		{"guest/cmd/airlock-guest", "`review`", "row guest/cmd/airlock-guest"},
		{"guest/cmd/airlock-guest", "`sync/objects`", ""}, // its row allows it
		{"guest/client", "`vm`", "guest never imports vm, fyne or vz"},
		{"app/config", "`app/machine/launch`", "row app/config"},
		{"app/promote", "`app/machine/launch`", "row app/promote"},
		{"app/heldreq", "`app/sandbox`", "row app/heldreq"},
		{"app/machine/vmhost", "`vm/qemu`", "row app/machine/vmhost"},
		{"app/pipeline", "`app/machine/vmhost`", "row app/pipeline"}, // directly: through app/machine/launch it may
		{"app/gui", "`app/cli`", "row app/gui"},
		{"app/cli", "`fyne.io/fyne/v2`", "row app/cli"},
		{"app/cli", "`fyne.io/fyne/v2`", "only app/gui/... and main import fyne"},
		{"app", "`vm/qemu`", "row app"}, // main is thin: directly, only the CLI and the GUI
		{"app/machine/idle", "`github.com/Code-Hex/vz/v3`", "only vm/vz imports vz"},
		{"sync/manifest", "`fyne.io/fyne/v2`", "row sync/manifest"},
		{"sync/transfer", "`guest/client`", "row sync/transfer"},
		{"vm/disk", "`app/home`", "nothing outside app imports app"},
		{"vm/qemu", "`guest/client`", "row vm/qemu"},
		{"packaging", "`sync/manifest`", "row packaging"},
		{"internal/atomicfile", "`golang.org/x/sys/unix`", "row internal/atomicfile"},
		{"app/home", "`testkit/testenv`", "testkit, internal/layout and app/cli/clitest are for tests only"},
		{"internal/safetext", "`vm`", "internal holds small utilities that import nothing of the module outside internal"},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%s→%s", tt.pkg, strings.Trim(tt.plant, "`")), func(t *testing.T) {
			t.Parallel()
			target, err := parsePath(tt.plant, folders)
			if err != nil {
				t.Fatal(err)
			}
			g, err := goList("linux", plant(t, tt.pkg, target), "./"+tt.pkg)
			if err != nil {
				t.Fatal(err)
			}
			var caught []string
			for _, v := range check(g, rules) {
				if rel(v.pkg) != tt.pkg {
					t.Fatalf("checked %s, which was not asked for: %v", rel(v.pkg), v)
				}
				if v.chain[1] != target { // a chain through the planted import
					t.Errorf("the package breaks a rule without the planted import: %v", v)
					continue
				}
				caught = append(caught, v.rule.name)
				if v.rule.name == tt.broken {
					t.Log(v)
					return
				}
			}
			if tt.broken != "" {
				t.Errorf("importing %s from %s breaks no rule named %q; it breaks %q", tt.plant, tt.pkg, tt.broken, caught)
			} else if len(caught) > 0 {
				t.Errorf("importing %s from %s is allowed, yet it breaks %q", tt.plant, tt.pkg, caught)
			}
		})
	}
}

// plant writes an overlay file for go list that adds zz_planted.go, which
// imports target, to the package in dir (relative to the module).
func plant(t *testing.T, dir, target string) string {
	t.Helper()
	abs, err := filepath.Abs(filepath.Join(root, dir))
	if err != nil {
		t.Fatal(err)
	}
	name := packageName(t, abs)
	tmp := t.TempDir()
	src := filepath.Join(tmp, "zz_planted.go")
	code := fmt.Sprintf("package %s\n\nimport _ %q\n", name, target)
	if err := os.WriteFile(src, []byte(code), 0o644); err != nil {
		t.Fatal(err)
	}
	overlay, err := json.Marshal(map[string]map[string]string{
		"Replace": {filepath.Join(abs, "zz_planted.go"): src},
	})
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(tmp, "overlay.json")
	if err := os.WriteFile(file, overlay, 0o644); err != nil {
		t.Fatal(err)
	}
	return file
}

// packageName reads the package clause of a Go file (not a test) in dir.
func packageName(t *testing.T, dir string) string {
	t.Helper()
	matches, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range matches {
		if strings.HasSuffix(m, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(token.NewFileSet(), m, nil, parser.PackageClauseOnly)
		if err != nil {
			t.Fatal(err)
		}
		return f.Name.Name
	}
	t.Fatalf("no Go file in %s", dir)
	return ""
}
