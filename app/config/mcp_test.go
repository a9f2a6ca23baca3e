package config

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestMCPProjects allows what [mcp] projects names and nothing else: not
// by default, not a folder beside an allowed one, not through a link
// inside an allowed folder, and not ~/.ssh through "..".
func TestMCPProjects(t *testing.T) {
	home := t.TempDir()
	for _, d := range []string{"src/app", "src/app/sub", "work/deep/er", ".ssh", "other"} {
		if err := os.MkdirAll(filepath.Join(home, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink(filepath.Join(home, ".ssh"), filepath.Join(home, "src", "keys")); err != nil {
		t.Fatal(err)
	}
	m := MCP{Projects: []string{"~/src/*", filepath.Join(home, "work") + "/**"}}
	if err := m.Validate(); err != nil {
		t.Fatal(err)
	}
	for dir, want := range map[string]bool{
		"src/app":       true,
		"src/app/sub":   false, // * is one folder
		"src/keys":      false, // a link to ~/.ssh
		"src/../.ssh":   false,
		".ssh":          false,
		"other":         false,
		"work":          true,
		"work/deep/er":  true,
		"src/app/../..": false, // home itself
	} {
		got, err := m.AllowProject(filepath.Join(home, dir), home)
		if want != (err == nil) {
			t.Errorf("%s: %q, %v; want allowed %v", dir, got, err, want)
		}
		if !want && err != nil && !errors.Is(err, ErrProjectNotAllowed) {
			t.Errorf("%s: %v, want ErrProjectNotAllowed", dir, err)
		}
	}
	_, err := MCP{}.AllowProject(filepath.Join(home, "src/app"), home)
	if !errors.Is(err, ErrProjectNotAllowed) || !strings.Contains(err.Error(), "[mcp]\nprojects = [\"~/src/*\"]") {
		t.Errorf("nothing allowed: %v; want the lines to add", err)
	}
	if _, err := m.AllowProject("src/app", home); err == nil {
		t.Error("a relative project was allowed")
	}
}

func TestMCPProjectsValidate(t *testing.T) {
	err := MCP{Projects: []string{"", "src/*", "~/a/../b", "/x/[", "~/ok/*"}}.Validate()
	if err == nil {
		t.Fatal("no error")
	}
	for _, want := range []string{"mcp.projects 1", "mcp.projects 2", "mcp.projects 3", "mcp.projects 4"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("%v: does not name %s", err, want)
		}
	}
	if strings.Contains(err.Error(), "mcp.projects 5") {
		t.Errorf("%v: a good pattern refused", err)
	}
}

func TestMCPInConfigFile(t *testing.T) {
	p := filepath.Join(t.TempDir(), "config.toml")
	if err := os.WriteFile(p, []byte("[mcp]\nprojects = [\"~/src/*\"]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	u, err := LoadUser(p)
	if err != nil || len(u.MCP.Projects) != 1 {
		t.Fatalf("%+v, %v", u.MCP, err)
	}
	if err := os.WriteFile(p, []byte("[mcp]\nproject = [\"~/src/*\"]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadUser(p); err == nil || !strings.Contains(err.Error(), "[mcp] projects") {
		t.Errorf("an unknown key: %v", err)
	}
}
