package image

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"

	"github.com/airlock-dev/airlock/vm"
)

// debPackage is one version of a Debian package, as apt-cache shows it.
type debPackage struct {
	Name    string
	Version string
	Arch    string // Architecture field: amd64, arm64 or all
	SHA256  string
	Size    int64
	Depends string
}

// Spec is the name apt accepts for exactly this package: name:arch=version.
func (p *debPackage) Spec() string { return p.Name + ":" + p.Arch + "=" + p.Version }

// FileName is the name `apt-get download` gives the .deb: the version's
// epoch colon is written %3a.
func (p *debPackage) FileName() string {
	return p.Name + "_" + strings.ReplaceAll(p.Version, ":", "%3a") + "_" + p.Arch + ".deb"
}

// apt fetches and unpacks Debian packages with the host's apt and dpkg.
// The command runner is a field so tests can stand in for apt.
type apt struct {
	// cacheDir keeps downloaded .debs; apt-get download runs in it.
	cacheDir string
	log      *slog.Logger
	// run runs a program in dir and returns its combined output.
	run func(ctx context.Context, dir, name string, args ...string) ([]byte, error)
	// lookPath finds a program (exec.LookPath).
	lookPath func(string) (string, error)
}

func newApt(cacheDir string, log *slog.Logger) *apt {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &apt{cacheDir: cacheDir, log: log, run: runCommand, lookPath: exec.LookPath}
}

// runCommand runs name with args in dir under the C locale, so apt's output
// can be parsed, and returns its combined output.
func runCommand(ctx context.Context, dir, name string, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "LC_ALL=C", "LANG=C", "DEBIAN_FRONTEND=noninteractive")
	out, err := cmd.CombinedOutput()
	if err != nil {
		if ctx.Err() != nil {
			return out, ctx.Err()
		}
		return out, fmt.Errorf("%s %s: %w%s", name, strings.Join(args, " "), err, outputTail(out))
	}
	return out, nil
}

// outputTail is the last few lines of a command's output, for an error
// message.
func outputTail(out []byte) string {
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(lines) == 1 && lines[0] == "" {
		return ""
	}
	if len(lines) > 6 {
		lines = lines[len(lines)-6:]
	}
	return "\n\t" + strings.Join(lines, "\n\t")
}

// aptTools are the programs an image build needs.
var aptTools = []string{"apt-get", "apt-cache", "dpkg", "dpkg-deb"}

// check makes sure the host has apt and dpkg and offers packages for arch,
// and says what to do when it does not.
func (a *apt) check(ctx context.Context, arch vm.Arch) error {
	var missing []string
	for _, t := range aptTools {
		if _, err := a.lookPath(t); err != nil {
			missing = append(missing, t)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("building an image needs Debian's package tools, and this host lacks %s: build on Debian (bookworm or later) or in a Debian container",
			strings.Join(missing, ", "))
	}
	da := debArch(arch)
	native, err := a.run(ctx, "", "dpkg", "--print-architecture")
	if err != nil {
		return fmt.Errorf("ask dpkg for the host architecture: %w", err)
	}
	if strings.TrimSpace(string(native)) == da {
		return nil
	}
	foreign, err := a.run(ctx, "", "dpkg", "--print-foreign-architectures")
	if err != nil {
		return fmt.Errorf("ask dpkg for foreign architectures: %w", err)
	}
	if !slices.Contains(strings.Fields(string(foreign)), da) {
		return foreignArchError(arch)
	}
	return nil
}

func foreignArchError(arch vm.Arch) error {
	return fmt.Errorf("building an %s image needs Debian's %s packages, which this host's apt does not offer; enable them with: sudo dpkg --add-architecture %s && sudo apt-get update",
		arch, debArch(arch), debArch(arch))
}

// resolve asks apt which version of each named package for arch it would
// fetch (the candidate) and returns them by name. It runs apt-cache twice
// whatever the number of names: without a binary cache (as in containers)
// each run reparses every package list, which takes seconds.
func (a *apt) resolve(ctx context.Context, arch vm.Arch, names ...string) (map[string]*debPackage, error) {
	args := []string{"policy"}
	for _, n := range names {
		args = append(args, n+":"+debArch(arch))
	}
	out, err := a.run(ctx, "", "apt-cache", args...)
	if err != nil {
		return nil, fmt.Errorf("resolve packages: %w", err)
	}
	cands := policyCandidates(out)
	want := make(map[string]string)
	for _, n := range names {
		if cands[n] == "" {
			return nil, a.noPackage(ctx, n, arch)
		}
		want[n] = cands[n]
	}
	return a.show(ctx, arch, want)
}

// show returns the given versions (by package name) of packages for arch.
func (a *apt) show(ctx context.Context, arch vm.Arch, versions map[string]string) (map[string]*debPackage, error) {
	args := []string{"show"}
	for _, n := range slices.Sorted(maps.Keys(versions)) {
		args = append(args, n+":"+debArch(arch)+"="+versions[n])
	}
	out, err := a.run(ctx, "", "apt-cache", args...)
	if err != nil {
		return nil, fmt.Errorf("resolve packages: %w", err)
	}
	pkgs, err := parseShow(out)
	if err != nil {
		return nil, fmt.Errorf("resolve packages: %w", err)
	}
	got := make(map[string]*debPackage)
	for _, p := range pkgs {
		if v, ok := versions[p.Name]; ok && p.Version == v && got[p.Name] == nil {
			got[p.Name] = p
		}
	}
	for n, v := range versions {
		if got[n] == nil {
			return nil, fmt.Errorf("resolve packages: apt-cache show did not show %s:%s=%s:%s", n, debArch(arch), v, outputTail(out))
		}
	}
	return got, nil
}

// noPackage explains why apt has no candidate for name: a foreign
// architecture without package lists, or a host without Debian's sources.
func (a *apt) noPackage(ctx context.Context, name string, arch vm.Arch) error {
	if native, err := a.run(ctx, "", "dpkg", "--print-architecture"); err == nil && strings.TrimSpace(string(native)) != debArch(arch) {
		return fmt.Errorf("apt knows no package %s for %s; the %s package lists may not be downloaded yet: run sudo apt-get update (and, if you have not, sudo dpkg --add-architecture %s first)",
			name, arch, debArch(arch), debArch(arch))
	}
	return fmt.Errorf("apt knows no package %s for %s; Airlock builds images from Debian's packages: add a Debian source (deb http://deb.debian.org/debian bookworm main) and run sudo apt-get update",
		name, arch)
}

// policyCandidates returns the Candidate version of each package in
// `apt-cache policy` output, by package name; a package without one is
// left out.
func policyCandidates(out []byte) map[string]string {
	cands := make(map[string]string)
	var pkg string
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		line := sc.Text()
		if line == "" {
			continue
		}
		if line[0] != ' ' && line[0] != '\t' {
			// "busybox-static:" or "busybox-static:arm64:"
			pkg, _, _ = strings.Cut(strings.TrimSuffix(line, ":"), ":")
			continue
		}
		k, v, ok := strings.Cut(strings.TrimSpace(line), ":")
		if ok && k == "Candidate" && pkg != "" {
			if v = strings.TrimSpace(v); v != "(none)" && v != "" {
				cands[pkg] = v
			}
		}
	}
	return cands
}

// parseShow parses the stanzas of `apt-cache show` output.
func parseShow(out []byte) ([]*debPackage, error) {
	var pkgs []*debPackage
	fields := make(map[string]string)
	var last string
	flush := func() error {
		if len(fields) == 0 {
			return nil
		}
		p := &debPackage{
			Name:    fields["Package"],
			Version: fields["Version"],
			Arch:    fields["Architecture"],
			SHA256:  strings.ToLower(fields["SHA256"]),
			Depends: fields["Depends"],
		}
		if _, err := fmt.Sscan(fields["Size"], &p.Size); err != nil {
			p.Size = 0
		}
		if p.Name == "" || p.Version == "" || p.Arch == "" || len(p.SHA256) != 64 {
			return fmt.Errorf("apt-cache show gave a package without Package, Version, Architecture and SHA256 fields:%s", outputTail(out))
		}
		pkgs = append(pkgs, p)
		clear(fields)
		last = ""
		return nil
	}
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.TrimSpace(line) == "":
			if err := flush(); err != nil {
				return nil, err
			}
		case line[0] == ' ' || line[0] == '\t':
			if last != "" {
				fields[last] += "\n" + strings.TrimSpace(line)
			}
		default:
			k, v, ok := strings.Cut(line, ":")
			if ok {
				last = k
				fields[k] = strings.TrimSpace(v)
			}
		}
	}
	if err := flush(); err != nil {
		return nil, err
	}
	if len(pkgs) == 0 {
		return nil, fmt.Errorf("apt-cache show showed no package:%s", outputTail(out))
	}
	return pkgs, nil
}

// dependency is one package a Depends field names, with its version when
// pinned with "(= version)".
type dependency struct {
	Name, Version string
}

// parseDepends parses a Depends field, taking the first of alternatives.
func parseDepends(s string) []dependency {
	var deps []dependency
	for _, clause := range strings.Split(s, ",") {
		alt, _, _ := strings.Cut(clause, "|")
		alt = strings.TrimSpace(alt)
		if alt == "" {
			continue
		}
		var d dependency
		name, _, _ := strings.Cut(alt, "(")
		name, _, _ = strings.Cut(strings.TrimSpace(name), ":") // foo:any
		d.Name = name
		if i := strings.Index(alt, "("); i >= 0 {
			c := strings.TrimSuffix(strings.TrimSpace(alt[i+1:]), ")")
			if v, ok := strings.CutPrefix(c, "="); ok && !strings.HasPrefix(c, "=<") && !strings.HasPrefix(c, "=>") {
				d.Version = strings.TrimSpace(v)
			}
		}
		deps = append(deps, d)
	}
	return deps
}

// kernelMetaPackage is the Debian meta package that depends on the current
// cloud kernel for arch.
func kernelMetaPackage(arch vm.Arch) string { return "linux-image-cloud-" + debArch(arch) }

// kernelFor resolves the cloud kernel meta package for arch to the
// concrete linux-image-<release> package it depends on.
func (a *apt) kernelFor(ctx context.Context, arch vm.Arch, meta *debPackage) (*debPackage, error) {
	for _, d := range parseDepends(meta.Depends) {
		if !strings.HasPrefix(d.Name, "linux-image-") || d.Name == meta.Name {
			continue
		}
		if d.Version == "" {
			pkgs, err := a.resolve(ctx, arch, d.Name)
			if err != nil {
				return nil, err
			}
			return pkgs[d.Name], nil
		}
		pkgs, err := a.show(ctx, arch, map[string]string{d.Name: d.Version})
		if err != nil {
			return nil, err
		}
		return pkgs[d.Name], nil
	}
	return nil, fmt.Errorf("resolve kernel: %s %s depends on no linux-image package (Depends: %s)", meta.Name, meta.Version, meta.Depends)
}

// download returns the path of p's .deb in the cache, fetching it with
// `apt-get download` unless a copy with the right SHA-256 is there. It
// reports whether the cached copy was used. The download goes to a folder
// of its own and is renamed into the cache once checked: two builds
// fetching the same package at once (the minimal and the full image's
// kernel) each see a whole file, never the other's half.
func (a *apt) download(ctx context.Context, p *debPackage) (string, bool, error) {
	if err := os.MkdirAll(a.cacheDir, 0o700); err != nil { // cache/ is the user's: private
		return "", false, fmt.Errorf("download %s: %w", p.Name, err)
	}
	file := filepath.Join(a.cacheDir, p.FileName())
	if fm, err := hashFile(file); err == nil {
		if fm.SHA256 == p.SHA256 {
			return file, true, nil
		}
		a.log.Warn("cached package has the wrong checksum; fetching it again", "file", file, "sha256", fm.SHA256, "want", p.SHA256)
	}
	tmp, err := os.MkdirTemp(a.cacheDir, ".download-*")
	if err != nil {
		return "", false, fmt.Errorf("download %s: %w", p.Name, err)
	}
	defer os.RemoveAll(tmp)
	out, err := a.run(ctx, tmp, "apt-get", "download", p.Spec())
	if err != nil {
		return "", false, fmt.Errorf("download %s: %w", p.Name, err)
	}
	a.log.Debug("apt-get download", "package", p.Spec(), "output", string(out))
	got := filepath.Join(tmp, p.FileName())
	fm, err := hashFile(got)
	if err != nil {
		return "", false, fmt.Errorf("download %s: apt-get download did not leave %s: %w", p.Name, p.FileName(), err)
	}
	if fm.SHA256 != p.SHA256 {
		return "", false, fmt.Errorf("download %s: %s has sha256 %s, apt's index says %s", p.Name, p.FileName(), fm.SHA256, p.SHA256)
	}
	if err := os.Rename(got, file); err != nil {
		return "", false, fmt.Errorf("download %s: %w", p.Name, err)
	}
	return file, false, nil
}

// extract unpacks the file system tree of deb into dir.
func (a *apt) extract(ctx context.Context, deb, dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("extract %s: %w", filepath.Base(deb), err)
	}
	if _, err := a.run(ctx, "", "dpkg-deb", "-x", deb, dir); err != nil {
		return fmt.Errorf("extract %s: %w", filepath.Base(deb), err)
	}
	return nil
}
