package review

import (
	"bytes"
	"encoding/json"
	"fmt"
	"path"
	"reflect"
	"strings"

	"github.com/airlock-dev/airlock/sync/manifest"
)

// Files that run on the user's machine later: a change to one of them is
// flagged FlagHostExec, because approving it lets the agent's code out of
// the sandbox the next time the user runs git, cd, make, npm, the editor
// or CI. The list is built in; the user extends it (Options.HostExec,
// from config.toml's [review] host_exec) and nothing can shorten it.
//
// Patterns are gitignore-like globs over the project path: one without a
// slash matches a name at any depth (".envrc" flags "web/.envrc"); one
// with a slash is anchored at the project root ("/" in front changes
// nothing); "**" stands for any number of directories; a pattern that
// matches a directory matches everything under it ("dir/" is the same as
// "dir"). Each element is matched with path.Match.

// hostExecRule is one pattern of the built-in list and what runs it.
type hostExecRule struct {
	pattern string
	reason  string
}

// HostExecPrefix starts the reason of every FlagHostExec flag made from
// a pattern.
const HostExecPrefix = "runs on your machine: "

// hostExecRules is the built-in list; the first match gives the reason.
var hostExecRules = []hostExecRule{
	// git
	{".git/hooks", "git hook"},
	{".git", "git's own directory: its config and hooks run commands"},
	{".husky", "git hook (husky)"},
	{".githooks", "git hook (a hooks folder git is pointed at)"},
	{".pre-commit-config.yaml", "pre-commit runs the hooks it lists on every commit"},
	{".pre-commit-hooks.yaml", "pre-commit runs the hooks it defines"},
	{"lefthook.yml", "git hook (lefthook)"},
	{".lefthook.yml", "git hook (lefthook)"},
	{"lefthook.yaml", "git hook (lefthook)"},
	{".lintstagedrc*", "lint-staged runs its commands on every commit"},
	{"lint-staged.config.*", "lint-staged runs its commands on every commit"},
	{".gitattributes", "git runs the filters and diff drivers it names"},
	{".gitmodules", "git clones and checks out what it names"},
	{".gitconfig", "git config: it can name commands git runs"},
	// shell environments
	{".envrc", "direnv runs it when you cd in"},
	{".env.d", "direnv runs it when you cd in"},
	{"mise.toml", "mise runs its hooks and tasks when you cd in"},
	{".mise.toml", "mise runs its hooks and tasks when you cd in"},
	{".bashrc", "your shell runs it"},
	{".bash_profile", "your shell runs it"},
	{".profile", "your shell runs it"},
	{".zshrc", "your shell runs it"},
	{".zshenv", "your shell runs it"},
	{".zprofile", "your shell runs it"},
	// editors
	{"**/.vscode/tasks.json", "your editor runs tasks from it"},
	{"**/.vscode/launch.json", "your editor runs its launch configurations"},
	{"**/.vscode/settings.json", "your editor's settings name programs it runs"},
	{"*.code-workspace", "your editor runs the tasks and settings it holds"},
	{"**/.idea/runConfigurations", "your IDE runs its run configurations"},
	{"**/.idea/workspace.xml", "your IDE runs its run configurations"},
	{"**/.run/*.run.xml", "your IDE runs its run configurations"},
	{".devcontainer", "your editor builds and starts the dev container it describes"},
	// build tools and package managers
	{"Makefile", "make runs it"},
	{"makefile", "make runs it"},
	{"GNUmakefile", "make runs it"},
	{"*.mk", "make runs it"},
	{"justfile", "just runs it"},
	{"Justfile", "just runs it"},
	{".justfile", "just runs it"},
	{"Taskfile.yml", "task runs it"},
	{"Taskfile.yaml", "task runs it"},
	{"build.rs", "cargo runs it on every build"},
	{"**/.cargo/config.toml", "cargo runs the runners, linkers and aliases it sets"},
	{"**/.cargo/config", "cargo runs the runners, linkers and aliases it sets"},
	{".npmrc", "npm reads it: it can set the shell and node options its scripts run with"},
	{".yarnrc", "yarn reads it: it can name the yarn that runs"},
	{".yarnrc.yml", "yarn reads it: it can name the yarn and plugins that run"},
	{"**/.yarn/plugins", "yarn runs its plugins"},
	{"**/.yarn/releases", "yarn runs the release it holds"},
	{".pnpmfile.cjs", "pnpm runs it on install"},
	{"binding.gyp", "npm builds it with node-gyp on install"},
	{"setup.py", "pip runs it on install"},
	{"pyproject.toml", "pip runs the build backend it names on install"},
	{"conftest.py", "pytest runs it on every test run"},
	{"noxfile.py", "nox runs it"},
	{"tox.ini", "tox runs the commands it lists"},
	{"Rakefile", "rake runs it"},
	{"Gemfile", "bundler runs it (it is Ruby)"},
	{"*.gradle", "gradle runs it"},
	{"*.gradle.kts", "gradle runs it"},
	{"gradlew", "the gradle wrapper: you run it"},
	{"**/gradle/wrapper", "the gradle wrapper downloads and runs what it names"},
	{"mvnw", "the maven wrapper: you run it"},
	{"**/.mvn", "the maven wrapper downloads and runs what it names"},
	{"pom.xml", "maven runs the plugins it lists"},
	// containers and CI
	{"Dockerfile", "docker runs it when you build"},
	{"*.Dockerfile", "docker runs it when you build"},
	{"Containerfile", "docker runs it when you build"},
	{"docker-compose.yml", "docker compose starts what it describes, with the mounts it names"},
	{"docker-compose.yaml", "docker compose starts what it describes, with the mounts it names"},
	{"compose.yml", "docker compose starts what it describes, with the mounts it names"},
	{"compose.yaml", "docker compose starts what it describes, with the mounts it names"},
	{".github/workflows", "CI runs it with your repository's secrets (GitHub Actions)"},
	{".github/actions", "CI runs it with your repository's secrets (GitHub Actions)"},
	{".gitlab-ci.yml", "CI runs it with your repository's secrets (GitLab)"},
	{".circleci", "CI runs it with your repository's secrets (CircleCI)"},
	{".buildkite", "CI runs it with your repository's secrets (Buildkite)"},
	{"Jenkinsfile", "CI runs it with your repository's secrets (Jenkins)"},
	{"azure-pipelines.yml", "CI runs it with your repository's secrets (Azure Pipelines)"},
	{".travis.yml", "CI runs it with your repository's secrets (Travis)"},
}

// Reasons of the special rules.
const (
	reasonExecutable = "made executable: it can be run on your machine"
	// An executable whose content changed, text or not (a NUL byte made
	// a script show as binary, unflagged, and apply --all took it).
	reasonExecutableChanged = "executable, and its content changed: it can be run on your machine"
	// A script (it starts with #!) whose bytes are not shown as text.
	reasonScriptAsBinary = "a script (it starts with #!) whose bytes are not shown as text: sh, python or the like would run it"
	reasonPackageJSON    = "npm runs its scripts (install, test, build…), and they changed"
)

// packageJSONKeys are the keys of package.json whose change runs code:
// the scripts, and the package manager corepack downloads and runs.
var packageJSONKeys = []string{"scripts", "packageManager"}

// MatchHostExec reports whether pattern (the syntax above) matches the
// project path p.
func MatchHostExec(pattern, p string) bool {
	return compileHostPattern(pattern).match(strings.Split(p, "/"))
}

// hostPattern is a pattern of the syntax above, split into its elements
// once: a changeset of 100,000 files matched each against every rule,
// splitting the rule and the path again each time, which took most of
// its time.
type hostPattern struct {
	elems   []string
	literal []bool // elems[i] holds no metacharacter of path.Match
}

func compileHostPattern(pattern string) hostPattern {
	pattern = strings.TrimSuffix(strings.TrimPrefix(pattern, "/"), "/")
	if pattern == "" {
		return hostPattern{}
	}
	hp := hostPattern{elems: strings.Split(pattern, "/")}
	for _, e := range hp.elems {
		hp.literal = append(hp.literal, !strings.ContainsAny(e, `*?[\`))
	}
	return hp
}

// matchElem is path.Match of the pattern's element i against e, with a
// literal element compared as it is.
func (hp hostPattern) matchElem(i int, e string) bool {
	if hp.literal[i] {
		return hp.elems[i] == e
	}
	ok, _ := path.Match(hp.elems[i], e)
	return ok
}

// match reports whether hp matches the path of elements elems.
func (hp hostPattern) match(elems []string) bool {
	switch len(hp.elems) {
	case 0:
		return false
	case 1:
		// A name: any element of the path (a matched directory covers
		// everything under it).
		for _, e := range elems {
			if hp.matchElem(0, e) {
				return true
			}
		}
		return false
	}
	// Anchored: the pattern matches p or one of its parent directories.
	for n := 1; n <= len(elems); n++ {
		if hp.matchElems(0, elems[:n]) {
			return true
		}
	}
	return false
}

// matchElems matches path elements against the pattern's elements from
// i on, "**" standing for any number of elements.
func (hp hostPattern) matchElems(i int, elems []string) bool {
	for ; i < len(hp.elems); i++ {
		if hp.elems[i] == "**" {
			for j := 0; j <= len(elems); j++ {
				if hp.matchElems(i+1, elems[j:]) {
					return true
				}
			}
			return false
		}
		if len(elems) == 0 || !hp.matchElem(i, elems[0]) {
			return false
		}
		elems = elems[1:]
	}
	return len(elems) == 0
}

// compiledRule is a rule of a built-in list with its pattern compiled.
type compiledRule struct {
	pattern hostPattern
	reason  string
}

func compileRules[R hostExecRule | ciRule](rules []R) []compiledRule {
	out := make([]compiledRule, len(rules))
	for i, r := range rules {
		h := hostExecRule(r)
		out[i] = compiledRule{compileHostPattern(h.pattern), h.reason}
	}
	return out
}

// The built-in lists, compiled once: read-only after init.
var (
	hostExecCompiled = compileRules(hostExecRules)
	ciCompiled       = compileRules(ciRules)
)

// firstMatch returns the reason of the first rule of rules that matches
// the path of elements elems.
func firstMatch(rules []compiledRule, elems []string) (string, bool) {
	for _, r := range rules {
		if r.pattern.match(elems) {
			return r.reason, true
		}
	}
	return "", false
}

// hostExecFlag returns the FlagHostExec flag of f, if it deserves one:
// its path (or its rename source, or the path its new link points to)
// matches the built-in list or a pattern of extra; package.json's
// scripts changed; or the file was made executable.
func hostExecFlag(f *File, extra []string) (Flag, bool) {
	paths := []string{f.Path}
	if f.OldPath != "" {
		paths = append(paths, f.OldPath)
	}
	if f.New != nil && f.New.Type == manifest.Symlink {
		if t := linkTarget(f.Path, f.New.Target); t != "" {
			paths = append(paths, t)
		}
	}
	for _, p := range paths {
		reason, ok := hostExecReason(p, extra)
		if !ok {
			continue
		}
		if p != f.Path && p != f.OldPath {
			// The target comes from the guest: quoted, so that no
			// control character reaches a diff header or a terminal.
			reason = fmt.Sprintf("a link to %q: %s", p, reason)
		}
		return Flag{Kind: FlagHostExec, Reason: HostExecPrefix + reason}, true
	}
	if path.Base(f.Path) == "package.json" && packageScriptsChanged(f.oldData, f.newData) {
		return Flag{Kind: FlagHostExec, Reason: HostExecPrefix + reasonPackageJSON}, true
	}
	if madeExecutable(f) {
		return Flag{Kind: FlagHostExec, Reason: reasonExecutable}, true
	}
	if executableChanged(f) {
		return Flag{Kind: FlagHostExec, Reason: reasonExecutableChanged}, true
	}
	if f.New != nil && f.New.Type == manifest.File && bytes.HasPrefix(f.newData, []byte("#!")) && looksBinary(f.newData) {
		return Flag{Kind: FlagHostExec, Reason: reasonScriptAsBinary}, true
	}
	return Flag{}, false
}

// executableChanged reports whether f was an executable regular file
// before and is one still, with other content: what runs when you run
// it changed, whether or not its bytes are shown as text.
func executableChanged(f *File) bool {
	return f.Old != nil && f.New != nil && f.Old.Type == manifest.File && f.New.Type == manifest.File &&
		f.Old.Mode&0o111 != 0 && f.New.Mode&0o111 != 0 && !bytes.Equal(f.oldData, f.newData)
}

// hostExecReason returns why p runs on the user's machine: the first
// built-in rule that matches, else the first of the user's patterns.
func hostExecReason(p string, extra []string) (string, bool) {
	elems := strings.Split(p, "/")
	if reason, ok := firstMatch(hostExecCompiled, elems); ok {
		return reason, true
	}
	for _, pat := range extra {
		if compileHostPattern(pat).match(elems) {
			return fmt.Sprintf("matches %q of host_exec in your config.toml", pat), true
		}
	}
	return "", false
}

// linkTarget is the project path a symbolic link at p pointing to target
// names, or "" when it leaves the project or is absolute.
func linkTarget(p, target string) string {
	if target == "" || path.IsAbs(target) {
		return ""
	}
	t := path.Join(path.Dir(p), target)
	if t == "." || t == ".." || strings.HasPrefix(t, "../") {
		return ""
	}
	return t
}

// madeExecutable reports whether f is a regular file whose owner may
// execute it now and could not before (or did not exist).
func madeExecutable(f *File) bool {
	if f.New == nil || f.New.Type != manifest.File || f.New.Mode&0o100 == 0 {
		return false
	}
	return f.Old == nil || f.Old.Type != manifest.File || f.Old.Mode&0o100 == 0
}

// packageScriptsChanged reports whether the keys of package.json that
// run code differ between old and new (missing sides are empty). A side
// that is not a JSON object counts as changed: what npm makes of it is
// not for Airlock to guess.
func packageScriptsChanged(old, new []byte) bool {
	o, okO := packageRunKeys(old)
	n, okN := packageRunKeys(new)
	if !okO || !okN {
		return true
	}
	return !reflect.DeepEqual(o, n)
}

func packageRunKeys(data []byte) (map[string]any, bool) {
	out := map[string]any{}
	if len(bytes.TrimSpace(data)) == 0 {
		return out, true
	}
	var top map[string]json.RawMessage
	if err := json.Unmarshal(data, &top); err != nil {
		return nil, false
	}
	for _, k := range packageJSONKeys {
		raw, ok := top[k]
		if !ok {
			continue
		}
		var v any
		if err := json.Unmarshal(raw, &v); err != nil {
			return nil, false
		}
		out[k] = v
	}
	return out, true
}
