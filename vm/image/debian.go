package image

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/airlock-dev/airlock/vm"
)

// DebMeta is one installed Debian package.
type DebMeta struct {
	Package string `toml:"package"`
	Version string `toml:"version"`
	Arch    string `toml:"arch"`
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
		// dpkg syncs nothing: the tree is copied into the disk image
		// and removed, and a build that stops halfway is started
		// again (minbase: 60-67 s instead of 84-89 s).
		"--dpkgopt=force-unsafe-io",
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
