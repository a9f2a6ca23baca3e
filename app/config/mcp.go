package config

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// MCP is the user's [mcp] table: the projects an MCP client of airlock
// mcp (an agent on the host) may open as sandboxes. An agent's prompt
// can be anyone's text, so nothing is allowed by default: a hostile
// prompt must not open ~/.ssh as a project.
type MCP struct {
	// Projects are folders, absolute or under "~/", each element a
	// filepath.Match glob ("~/src/*": every folder directly in ~/src); a
	// pattern ending in "/**" also takes every folder beneath. A project
	// is matched with its symbolic links resolved, so a link inside an
	// allowed folder that points elsewhere is not allowed.
	Projects []string `toml:"projects"`
}

// Validate reports every pattern that cannot match an absolute folder.
func (m MCP) Validate() error {
	var errs []error
	for i, p := range m.Projects {
		if err := validProjectPattern(p); err != nil {
			errs = append(errs, fmt.Errorf("mcp.projects %d: %w", i+1, err))
		}
	}
	return errors.Join(errs...)
}

func validProjectPattern(p string) error {
	if strings.TrimSpace(p) == "" || strings.ContainsRune(p, 0) {
		return fmt.Errorf("%q: want a folder such as \"~/src/*\" or \"/work/app\"", p)
	}
	if !strings.HasPrefix(p, "/") && !strings.HasPrefix(p, "~/") && p != "~" {
		return fmt.Errorf("%q: want an absolute folder or one under ~/ (a relative one would depend on where airlock mcp starts)", p)
	}
	for _, e := range strings.Split(strings.TrimSuffix(p, "/**"), "/") {
		if e == ".." {
			return fmt.Errorf("%q: no \"..\" (name the folder itself)", p)
		}
		if _, err := filepath.Match(e, ""); err != nil {
			return fmt.Errorf("%q: %q is not a valid pattern: %w", p, e, err)
		}
	}
	return nil
}

// ErrProjectNotAllowed means a project is not one of [mcp] projects.
var ErrProjectNotAllowed = errors.New("the project is not one [mcp] projects allows")

// AllowProject returns dir as the project an MCP client may open (an
// absolute path with its links resolved), or ErrProjectNotAllowed with
// how to allow it. home is the user's home folder, for "~/".
func (m MCP) AllowProject(dir, home string) (string, error) {
	if !filepath.IsAbs(dir) {
		return "", fmt.Errorf("project %q: give an absolute path", dir)
	}
	real, err := filepath.EvalSymlinks(filepath.Clean(dir))
	if err != nil {
		return "", fmt.Errorf("project %s: %w", dir, err)
	}
	if fi, err := os.Stat(real); err != nil || !fi.IsDir() {
		return "", fmt.Errorf("project %s: not a folder", dir)
	}
	for _, p := range m.Projects {
		if validProjectPattern(p) == nil && matchProject(expandHome(p, home), real) {
			return real, nil
		}
	}
	hint := "nothing is allowed until you add it"
	if len(m.Projects) > 0 {
		hint = "allowed: " + strings.Join(m.Projects, ", ")
	}
	return "", fmt.Errorf("project %s: %w (%s): add it to config.toml, e.g.\n\n[mcp]\nprojects = [%q]",
		real, ErrProjectNotAllowed, hint, filepath.Join(filepath.Dir(tildeOf(real, home)), "*"))
}

// matchProject reports whether the folder real (links resolved) matches
// pattern, whose fixed leading folders have their links resolved too.
func matchProject(pattern, real string) bool {
	deep := strings.HasSuffix(pattern, "/**")
	pattern = filepath.Clean(strings.TrimSuffix(pattern, "/**"))
	pattern = resolvePrefix(pattern)
	if ok, _ := filepath.Match(pattern, real); ok {
		return true
	}
	if !deep {
		return false
	}
	for d := filepath.Dir(real); d != real; real, d = d, filepath.Dir(d) {
		if ok, _ := filepath.Match(pattern, d); ok {
			return true
		}
	}
	return false
}

// resolvePrefix resolves the links of the part of pattern before its
// first glob element ("/home/u/src" of "/home/u/src/*"), when it exists.
func resolvePrefix(pattern string) string {
	elems := strings.Split(pattern, string(filepath.Separator))
	i := 0
	for i < len(elems) && !strings.ContainsAny(elems[i], `*?[\`) {
		i++
	}
	prefix := strings.Join(elems[:i], string(filepath.Separator))
	if prefix == "" {
		return pattern
	}
	real, err := filepath.EvalSymlinks(prefix)
	if err != nil {
		return pattern
	}
	return filepath.Join(append([]string{real}, elems[i:]...)...)
}

func expandHome(p, home string) string {
	if p == "~" {
		return home
	}
	if rest, ok := strings.CutPrefix(p, "~/"); ok {
		return filepath.Join(home, rest)
	}
	return p
}

// tildeOf writes path under home as "~/…", for a hint.
func tildeOf(path, home string) string {
	if home != "" {
		if rel, err := filepath.Rel(home, path); err == nil && rel != "." && !strings.HasPrefix(rel, "..") {
			return "~/" + rel
		}
	}
	return path
}
