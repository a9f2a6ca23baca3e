package image

import (
	"archive/tar"
	"bufio"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"

	"github.com/airlock-dev/airlock/vm"
)

// NpmPackage is an npm package pinned to one version.
type NpmPackage struct {
	Name    string `toml:"name"`
	Version string `toml:"version"`
}

func (p NpmPackage) String() string { return p.Name + "@" + p.Version }

// npmInstallArgs is the npm command line that installs the agent CLIs
// into the tree's /usr/local (run with the tree's own node and npm).
func npmInstallArgs(spec RootfsSpec, prefix, cache string) []string {
	a := []string{"install", "--global", "--prefix", prefix, "--cache", cache, "--prefer-offline",
		"--no-fund", "--no-audit", "--no-update-notifier", "--loglevel=error"}
	for _, p := range spec.Agents {
		a = append(a, p.String())
	}
	return a
}

// npmEnv is the environment npm installs the agent CLIs in: the tree's
// node first on PATH, native addons built against the tree's node headers
// (nodedir), and none of the host user's npm configuration (userconfig:
// an empty file), which could point elsewhere.
func npmEnv(env []string, local, npmrc string) []string {
	out := make([]string, 0, len(env)+4)
	for _, kv := range env {
		k, _, _ := strings.Cut(kv, "=")
		if k == "PATH" || strings.HasPrefix(strings.ToLower(k), "npm_config_") {
			continue
		}
		out = append(out, kv)
	}
	path := filepath.Join(local, "bin")
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "PATH="); ok && v != "" {
			path += ":" + v
		}
	}
	return append(out, "PATH="+path, "npm_config_nodedir="+local, "npm_config_userconfig="+npmrc, "npm_config_update_notifier=false")
}

func agentList(ps []NpmPackage) string {
	var s []string
	for _, p := range ps {
		s = append(s, p.String())
	}
	return strings.Join(s, " ")
}

// NpmPack downloads p's tarball into dir with `npm pack` (kept there: a
// rebuild reuses it) and returns its path.
func NpmPack(ctx context.Context, npm string, p NpmPackage, dir string) (string, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil { // cache/ is the user's: private
		return "", err
	}
	base := strings.ReplaceAll(strings.TrimPrefix(p.Name, "@"), "/", "-") + "-" + p.Version + ".tgz"
	file := filepath.Join(dir, base)
	if _, err := os.Stat(file); err == nil {
		return file, nil
	}
	out, err := runCommand(ctx, dir, npm, "pack", "--silent", p.String())
	if err != nil {
		return "", fmt.Errorf("npm pack %s: %w%s", p, err, outputTail(out))
	}
	if _, err := os.Stat(file); err != nil {
		return "", fmt.Errorf("npm pack %s: no %s (it printed %q)", p, base, strings.TrimSpace(string(out)))
	}
	return file, nil
}

// extractNpmTarball writes the regular files of an npm tarball that
// dest maps to a path (its mode's executable bits kept).
func extractNpmTarball(tgz string, dest func(name string) (string, bool)) error {
	f, err := os.Open(tgz)
	if err != nil {
		return err
	}
	defer f.Close()
	zr, err := gzip.NewReader(bufio.NewReader(f))
	if err != nil {
		return err
	}
	tr := tar.NewReader(zr)
	n := 0
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return err
		}
		name := path.Clean(hdr.Name)
		if hdr.Typeflag != tar.TypeReg || strings.HasPrefix(name, "../") || path.IsAbs(name) {
			continue
		}
		out, ok := dest(name)
		if !ok {
			continue
		}
		if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
			return err
		}
		mode := os.FileMode(0o644)
		if hdr.Mode&0o111 != 0 {
			mode = 0o755
		}
		w, err := os.OpenFile(out, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, mode)
		if err != nil {
			return err
		}
		_, err = io.Copy(w, tr)
		if cerr := w.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return err
		}
		n++
	}
	if n == 0 {
		return errors.New("nothing to extract")
	}
	return nil
}

// installedNpm lists the packages of a node_modules tree, nested ones
// included, with their versions from each package.json, sorted. An
// aliased package lists the name and version its package.json gives
// (codex's native package is @openai/codex at VERSION-linux-x64).
func installedNpm(root string) ([]NpmPackage, error) {
	var out []NpmPackage
	err := filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() || p == root {
			return nil
		}
		// root is a node_modules directory itself.
		modules := func(dir string) bool { return dir == root || filepath.Base(dir) == "node_modules" }
		parent := filepath.Dir(p)
		isPkg := modules(parent) && !strings.HasPrefix(d.Name(), "@") && !strings.HasPrefix(d.Name(), ".") ||
			strings.HasPrefix(filepath.Base(parent), "@") && modules(filepath.Dir(parent))
		if !isPkg {
			return nil
		}
		b, err := os.ReadFile(filepath.Join(p, "package.json"))
		if err != nil {
			return nil
		}
		var pj struct{ Name, Version string }
		if json.Unmarshal(b, &pj) == nil && pj.Name != "" {
			out = append(out, NpmPackage{Name: pj.Name, Version: pj.Version})
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("list npm packages: %w", err)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Name != out[j].Name {
			return out[i].Name < out[j].Name
		}
		return out[i].Version < out[j].Version
	})
	return compactNpm(out), nil
}

func compactNpm(ps []NpmPackage) []NpmPackage {
	var out []NpmPackage
	for i, p := range ps {
		if i == 0 || p != ps[i-1] {
			out = append(out, p)
		}
	}
	return out
}

// checkAgents makes sure each agent CLI went in at its pinned version,
// with the native package for arch where it ships one.
func checkAgents(spec RootfsSpec, arch vm.Arch, installed []NpmPackage) error {
	have := map[string]bool{}
	for _, p := range installed {
		have[p.String()] = true
	}
	var errs []error
	for _, p := range spec.Agents {
		if !have[p.String()] {
			errs = append(errs, fmt.Errorf("%s is not installed", p))
		}
	}
	nodeArch := "x64"
	if arch == vm.ARM64 {
		nodeArch = "arm64"
	}
	for _, p := range spec.Agents {
		if p.Name == "@openai/codex" && !have["@openai/codex@"+p.Version+"-linux-"+nodeArch] {
			errs = append(errs, fmt.Errorf("%s's native linux-%s package is missing", p, nodeArch))
		}
	}
	return errors.Join(errs...)
}
