package review

import (
	"bytes"
	"encoding/json"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"path"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/BurntSushi/toml"
)

// Dependency manifests and lockfiles. A change to one is flagged
// FlagDependency with the dependency names added, removed and given
// another version, read by a parser per kind: only what is cheap and
// reliable (go.mod's require and replace lines, package.json's
// dependency objects, requirements lines, Cargo.toml's dependency
// tables…). A kind without a parser, a side that is binary, larger than
// maxManifestBytes or that does not parse, is flagged without names. A
// manifest whose dependencies did not change is not flagged; a lockfile
// always is.

// depSet maps a dependency's name to what pins it (a version, a
// specifier, a checksum: anything whose change is worth a "changed").
type depSet map[string]string

// depParser reads the dependencies of one side of a manifest.
type depParser func(data []byte) (depSet, error)

// manifestKind is a kind of dependency manifest or lockfile.
type manifestKind struct {
	name  string    // shown in the reason: "go.mod", "requirements"
	lock  bool      // a lockfile: every change is flagged
	parse depParser // nil: flagged without names
}

// manifestsByName are the manifests known by their file name.
var manifestsByName = map[string]manifestKind{
	"go.mod":                    {"go.mod", false, parseGoMod},
	"go.sum":                    {"go.sum", true, parseGoSum},
	"go.work":                   {"go.work", false, nil},
	"go.work.sum":               {"go.work.sum", true, parseGoSum},
	"package.json":              {"package.json", false, parsePackageJSON},
	"package-lock.json":         {"package-lock.json", true, parsePackageLock},
	"npm-shrinkwrap.json":       {"npm-shrinkwrap.json", true, parsePackageLock},
	"yarn.lock":                 {"yarn.lock", true, parseYarnLock},
	"pnpm-lock.yaml":            {"pnpm-lock.yaml", true, nil},
	"pnpm-workspace.yaml":       {"pnpm-workspace.yaml", false, nil},
	"bun.lock":                  {"bun.lock", true, nil},
	"bun.lockb":                 {"bun.lockb", true, nil},
	"deno.json":                 {"deno.json", false, nil},
	"deno.lock":                 {"deno.lock", true, nil},
	"pyproject.toml":            {"pyproject.toml", false, parsePyproject},
	"poetry.lock":               {"poetry.lock", true, parseTOMLPackages},
	"uv.lock":                   {"uv.lock", true, parseTOMLPackages},
	"pdm.lock":                  {"pdm.lock", true, parseTOMLPackages},
	"Pipfile":                   {"Pipfile", false, parsePipfile},
	"Pipfile.lock":              {"Pipfile.lock", true, parsePipfileLock},
	"setup.cfg":                 {"setup.cfg", false, nil},
	"environment.yml":           {"environment.yml", false, nil},
	"environment.yaml":          {"environment.yaml", false, nil},
	"Cargo.toml":                {"Cargo.toml", false, parseCargoToml},
	"Cargo.lock":                {"Cargo.lock", true, parseTOMLPackages},
	"Gemfile":                   {"Gemfile", false, parseGemfile},
	"gems.rb":                   {"gems.rb", false, parseGemfile},
	"Gemfile.lock":              {"Gemfile.lock", true, parseGemfileLock},
	"gems.locked":               {"gems.locked", true, parseGemfileLock},
	"pom.xml":                   {"pom.xml", false, parseXMLDeps},
	"build.gradle":              {"build.gradle", false, parseGradle},
	"build.gradle.kts":          {"build.gradle.kts", false, parseGradle},
	"libs.versions.toml":        {"libs.versions.toml", false, parseVersionCatalog},
	"gradle.lockfile":           {"gradle.lockfile", true, nil},
	"composer.json":             {"composer.json", false, parseComposerJSON},
	"composer.lock":             {"composer.lock", true, parseComposerLock},
	"Directory.Packages.props":  {"Directory.Packages.props", false, parseXMLDeps},
	"packages.config":           {"packages.config", false, nil},
	"packages.lock.json":        {"packages.lock.json", true, nil},
	"Package.swift":             {"Package.swift", false, nil},
	"Package.resolved":          {"Package.resolved", true, nil},
	"Podfile":                   {"Podfile", false, nil},
	"Podfile.lock":              {"Podfile.lock", true, nil},
	"Cartfile":                  {"Cartfile", false, nil},
	"Cartfile.resolved":         {"Cartfile.resolved", true, nil},
	"pubspec.yaml":              {"pubspec.yaml", false, nil},
	"pubspec.lock":              {"pubspec.lock", true, nil},
	"mix.exs":                   {"mix.exs", false, nil},
	"mix.lock":                  {"mix.lock", true, nil},
	"vcpkg.json":                {"vcpkg.json", false, nil},
	"conanfile.txt":             {"conanfile.txt", false, nil},
	"conanfile.py":              {"conanfile.py", false, nil},
	"flake.lock":                {"flake.lock", true, nil},
	"bower.json":                {"bower.json", false, nil},
	"project.clj":               {"project.clj", false, nil},
	"deps.edn":                  {"deps.edn", false, nil},
	"stack.yaml":                {"stack.yaml", false, nil},
	"cabal.project.freeze":      {"cabal.project.freeze", true, nil},
	"requirements.txt":          {"requirements.txt", false, parseRequirements},
	"MODULE.bazel":              {"MODULE.bazel", false, nil},
	"MODULE.bazel.lock":         {"MODULE.bazel.lock", true, nil},
	"WORKSPACE":                 {"WORKSPACE", false, nil},
	"dub.json":                  {"dub.json", false, nil},
	"elm.json":                  {"elm.json", false, nil},
	"rebar.config":              {"rebar.config", false, nil},
	"rebar.lock":                {"rebar.lock", true, nil},
	"shard.yml":                 {"shard.yml", false, nil},
	"shard.lock":                {"shard.lock", true, nil},
	"Brewfile":                  {"Brewfile", false, nil},
	"Brewfile.lock.json":        {"Brewfile.lock.json", true, nil},
	"renv.lock":                 {"renv.lock", true, nil},
	"DESCRIPTION":               {"DESCRIPTION", false, nil},
	"gradle-wrapper.properties": {"gradle-wrapper.properties", false, nil},
}

// depManifestOf returns the kind of manifest p is, if any.
func depManifestOf(p string) (manifestKind, bool) {
	if isVendored(p) {
		return manifestKind{}, false
	}
	base := path.Base(p)
	if k, ok := manifestsByName[base]; ok {
		return k, true
	}
	ext := path.Ext(base)
	switch {
	case ext == ".txt" || ext == ".in":
		stem := strings.ToLower(strings.TrimSuffix(base, ext))
		if strings.HasPrefix(stem, "requirements") || strings.HasSuffix(stem, "requirements") ||
			strings.HasPrefix(stem, "constraints") || path.Base(path.Dir(p)) == "requirements" {
			return manifestKind{shownName(base), false, parseRequirements}, true
		}
	case ext == ".csproj" || ext == ".fsproj" || ext == ".vbproj":
		return manifestKind{shownName(base), false, parseXMLDeps}, true
	case ext == ".gemspec":
		return manifestKind{shownName(base), false, nil}, true
	}
	return manifestKind{}, false
}

// DependencyPrefix starts the reason of every FlagDependency flag.
const DependencyPrefix = "dependencies: "

// dependencyFlag flags f when it is a dependency manifest or lockfile
// whose dependencies changed (a lockfile: whose content changed).
func dependencyFlag(f *File) (Flag, bool) {
	kind, ok := depManifestOf(f.Path)
	if !ok && f.OldPath != "" {
		kind, ok = depManifestOf(f.OldPath)
	}
	if !ok || f.IsDir() {
		return Flag{}, false
	}
	what := kind.name
	if kind.lock {
		what = "lockfile " + kind.name
	}
	switch {
	case f.Old == nil:
		what += " added"
	case f.New == nil:
		what += " deleted"
	default:
		what += " changed"
	}
	whole := func(why string) (Flag, bool) {
		return Flag{Kind: FlagDependency, Reason: DependencyPrefix + what + ": " + why}, true
	}
	switch {
	case f.Status == ModeChanged:
		return Flag{}, false
	case f.IsSymlink():
		return whole("a symbolic link now")
	case kind.parse == nil:
		if kind.lock {
			return whole("the exact versions installed change")
		}
		return whole("its dependencies are not listed here")
	case f.Binary:
		return whole("not text, its dependencies are not listed")
	case len(f.oldData) > maxManifestBytes || len(f.newData) > maxManifestBytes:
		return whole("too large to list its dependencies")
	}
	var oldDeps, newDeps depSet
	var err error
	if f.Old != nil {
		if oldDeps, err = parseSafely(kind.parse, f.oldData); err != nil {
			return whole("the old version does not parse, its dependencies are not listed")
		}
	}
	if f.New != nil {
		if newDeps, err = parseSafely(kind.parse, f.newData); err != nil {
			return whole("it does not parse, its dependencies are not listed")
		}
	}
	fl := Flag{Kind: FlagDependency}
	for name, v := range newDeps {
		old, had := oldDeps[name]
		switch {
		case !had:
			fl.Added = append(fl.Added, name)
		case old != v:
			fl.Changed = append(fl.Changed, name)
		}
	}
	for name := range oldDeps {
		if _, has := newDeps[name]; !has {
			fl.Removed = append(fl.Removed, name)
		}
	}
	if len(fl.Added)+len(fl.Removed)+len(fl.Changed) == 0 {
		if !kind.lock || bytes.Equal(f.oldData, f.newData) {
			return Flag{}, false
		}
		return whole("the same packages at the same versions, written differently")
	}
	var parts []string
	for _, l := range []struct {
		verb  string
		names *[]string
	}{{"added", &fl.Added}, {"removed", &fl.Removed}, {"other version", &fl.Changed}} {
		if len(*l.names) == 0 {
			continue
		}
		sort.Strings(*l.names)
		n := len(*l.names)
		if n > maxNames {
			*l.names = (*l.names)[:maxNames]
		}
		parts = append(parts, l.verb+" "+nameList(*l.names, n))
	}
	fl.Reason = DependencyPrefix + what + ": " + strings.Join(parts, "; ")
	return fl, true
}

// parseSafely runs parse and turns a panic into an error: the parsers
// (and the TOML and XML decoders under them) read hostile bytes.
func parseSafely(parse depParser, data []byte) (deps depSet, err error) {
	defer func() {
		if r := recover(); r != nil {
			deps, err = nil, fmt.Errorf("parser panicked: %v", r)
		}
	}()
	return parse(data)
}

// namesInReason is how many names one list of a reason shows.
const namesInReason = 8

// nameList is "a, b, c" of names shown safely, "… (n in all)" after
// namesInReason of them.
func nameList(names []string, n int) string {
	var b strings.Builder
	for i, name := range names {
		if i == namesInReason {
			fmt.Fprintf(&b, ", … (%d in all)", n)
			break
		}
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(DependencyName(name))
	}
	return b.String()
}

// replacePrefix marks a go.mod replace directive in a depSet; a module
// path holds no space, so no require line makes one.
const replacePrefix = "replace "

// DependencyName is a dependency name of a Flag (Added, Removed,
// Changed) as a reviewer reads it: quoted when it holds characters
// package names are not made of, a go.mod replace said in words.
func DependencyName(name string) string {
	if rest, ok := strings.CutPrefix(name, replacePrefix); ok {
		return shownName(rest) + " (replaced)"
	}
	return shownName(name)
}

// eachLine calls fn with each line of data, without its terminator, long
// lines cut to maxScanLineBytes.
func eachLine(data []byte, fn func(line string)) {
	for len(data) > 0 {
		i := bytes.IndexByte(data, '\n')
		var l []byte
		if i < 0 {
			l, data = data, nil
		} else {
			l, data = data[:i], data[i+1:]
		}
		fn(clip(strings.TrimSuffix(string(l), "\r")))
	}
}

// unquoteGo removes Go string quotes from a go.mod token.
func unquoteGo(s string) string {
	if len(s) >= 2 && (s[0] == '"' || s[0] == '`') {
		if u, err := strconv.Unquote(s); err == nil {
			return u
		}
	}
	return s
}

// parseGoMod reads go.mod's require and replace directives, single lines
// and blocks.
func parseGoMod(data []byte) (depSet, error) {
	deps := depSet{}
	block := ""
	add := func(verb string, fields []string) {
		switch verb {
		case "require":
			if len(fields) >= 1 {
				deps[unquoteGo(fields[0])] = strings.Join(fields[1:], " ")
			}
		case "replace":
			if i := slices.Index(fields, "=>"); i >= 1 {
				deps[replacePrefix+unquoteGo(fields[0])] = strings.Join(fields[1:], " ")
			}
		}
	}
	eachLine(data, func(l string) {
		if i := strings.Index(l, "//"); i >= 0 {
			l = l[:i]
		}
		fields := strings.Fields(l)
		if len(fields) == 0 {
			return
		}
		if block != "" {
			if fields[0] == ")" {
				block = ""
				return
			}
			add(block, fields)
			return
		}
		switch fields[0] {
		case "require", "replace":
			if len(fields) == 2 && fields[1] == "(" {
				block = fields[0]
				return
			}
			add(fields[0], fields[1:])
		case "exclude", "retract", "module", "go", "toolchain", "godebug", "tool", "ignore":
			if len(fields) == 2 && fields[1] == "(" {
				block = "skip"
			}
		}
	})
	return deps, nil
}

// parseGoSum reads go.sum: each module path with its versions and
// checksums, so a changed checksum is a changed dependency.
func parseGoSum(data []byte) (depSet, error) {
	deps := depSet{}
	eachLine(data, func(l string) {
		fields := strings.Fields(l)
		if len(fields) != 3 {
			return
		}
		deps[fields[0]] += fields[1] + " " + fields[2] + "\n"
	})
	return deps, nil
}

// jsonObject decodes data as a JSON object of raw values.
func jsonObject(data []byte) (map[string]json.RawMessage, error) {
	var top map[string]json.RawMessage
	if err := json.Unmarshal(data, &top); err != nil {
		return nil, err
	}
	if top == nil {
		return nil, errors.New("not a JSON object")
	}
	return top, nil
}

// addJSONKeys adds the keys of the object at key of top to deps, each
// with its raw value.
func addJSONKeys(deps depSet, top map[string]json.RawMessage, keys ...string) error {
	for _, k := range keys {
		raw, ok := top[k]
		if !ok || string(raw) == "null" {
			continue
		}
		var m map[string]json.RawMessage
		if err := json.Unmarshal(raw, &m); err != nil {
			return fmt.Errorf("%s: %w", k, err)
		}
		for name, v := range m {
			deps[name] = string(v)
		}
	}
	return nil
}

// parsePackageJSON reads the dependency objects of package.json.
func parsePackageJSON(data []byte) (depSet, error) {
	deps := depSet{}
	if len(bytes.TrimSpace(data)) == 0 {
		return deps, nil
	}
	top, err := jsonObject(data)
	if err != nil {
		return nil, err
	}
	if err := addJSONKeys(deps, top, "dependencies", "devDependencies", "peerDependencies", "optionalDependencies"); err != nil {
		return nil, err
	}
	return deps, nil
}

// parseComposerJSON reads composer.json's require and require-dev.
func parseComposerJSON(data []byte) (depSet, error) {
	deps := depSet{}
	top, err := jsonObject(data)
	if err != nil {
		return nil, err
	}
	if err := addJSONKeys(deps, top, "require", "require-dev"); err != nil {
		return nil, err
	}
	return deps, nil
}

// lockedPackage is what the JSON lockfiles say of one package.
type lockedPackage struct {
	Name      string `json:"name"`
	Version   string `json:"version"`
	Resolved  string `json:"resolved"`
	Integrity string `json:"integrity"`
}

func (p lockedPackage) pin() string { return p.Version + " " + p.Resolved + " " + p.Integrity + "\n" }

// pinsOf joins the pins of a name found more than once (a package
// installed at several versions) in a stable order.
func pinsOf(pins map[string][]string) depSet {
	deps := depSet{}
	for name, ps := range pins {
		sort.Strings(ps)
		deps[name] = strings.Join(ps, "")
	}
	return deps
}

// parsePackageLock reads package-lock.json (its "packages", keyed by
// install path, or the "dependencies" of lockfile version 1).
func parsePackageLock(data []byte) (depSet, error) {
	var lock struct {
		Packages     map[string]lockedPackage `json:"packages"`
		Dependencies map[string]lockedPackage `json:"dependencies"`
	}
	if err := json.Unmarshal(data, &lock); err != nil {
		return nil, err
	}
	pins := map[string][]string{}
	for key, p := range lock.Packages {
		i := strings.LastIndex(key, "node_modules/")
		if i < 0 {
			continue // the project itself, or a workspace folder
		}
		name := key[i+len("node_modules/"):]
		pins[name] = append(pins[name], p.pin())
	}
	if len(lock.Packages) == 0 {
		for name, p := range lock.Dependencies {
			pins[name] = append(pins[name], p.pin())
		}
	}
	return pinsOf(pins), nil
}

// parseComposerLock reads composer.lock's packages and packages-dev.
func parseComposerLock(data []byte) (depSet, error) {
	var lock struct {
		Packages    []lockedPackage `json:"packages"`
		PackagesDev []lockedPackage `json:"packages-dev"`
	}
	if err := json.Unmarshal(data, &lock); err != nil {
		return nil, err
	}
	pins := map[string][]string{}
	for _, p := range append(lock.Packages, lock.PackagesDev...) {
		if p.Name != "" {
			pins[p.Name] = append(pins[p.Name], p.pin())
		}
	}
	return pinsOf(pins), nil
}

// parsePipfileLock reads Pipfile.lock's default and develop packages.
func parsePipfileLock(data []byte) (depSet, error) {
	deps := depSet{}
	top, err := jsonObject(data)
	if err != nil {
		return nil, err
	}
	if err := addJSONKeys(deps, top, "default", "develop"); err != nil {
		return nil, err
	}
	return deps, nil
}

// parseYarnLock reads yarn.lock (classic and berry): each entry's
// header line names the package ("left-pad@^1.3.0, left-pad@^1.1.0:"),
// its indented lines pin it.
func parseYarnLock(data []byte) (depSet, error) {
	pins := map[string][]string{}
	var current []string
	pin := ""
	flush := func() {
		for _, name := range current {
			pins[name] = append(pins[name], pin)
		}
		current, pin = nil, ""
	}
	eachLine(data, func(l string) {
		if l == "" || l[0] == '#' {
			return
		}
		if l[0] != ' ' {
			flush()
			if !strings.HasSuffix(l, ":") {
				return
			}
			seen := map[string]bool{}
			for _, spec := range strings.Split(strings.TrimSuffix(l, ":"), ",") {
				spec = strings.Trim(strings.TrimSpace(spec), `"`)
				at := strings.LastIndex(spec, "@")
				if at <= 0 {
					continue
				}
				name := spec[:at]
				if i := strings.Index(name, "@npm:"); i > 0 {
					name = name[:i] // berry: "left-pad@npm:^1.3.0"
				}
				if !seen[name] && name != "__metadata" {
					seen[name] = true
					current = append(current, name)
				}
			}
			return
		}
		t := strings.TrimSpace(l)
		for _, k := range []string{"version", "resolved", "integrity", "checksum", "resolution"} {
			if strings.HasPrefix(t, k) {
				pin += t + "\n"
			}
		}
	})
	flush()
	return pinsOf(pins), nil
}

// pep508Name is the name at the start of a requirement ("requests[socks]
// >= 2.0 ; python_version < '3.8'").
var pep508Name = regexp.MustCompile(`^[A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?`)

var pep503Separators = regexp.MustCompile(`[-_.]+`)

// pythonName is a requirement's name normalised as pip compares them
// (PEP 503), or "".
func pythonName(req string) string {
	name := pep508Name.FindString(strings.TrimSpace(req))
	return strings.ToLower(pep503Separators.ReplaceAllString(name, "-"))
}

// parseRequirements reads a pip requirements file: one requirement a
// line; options (-r, -e, --hash…) and comments are skipped.
func parseRequirements(data []byte) (depSet, error) {
	deps := depSet{}
	eachLine(data, func(l string) {
		if i := strings.Index(l, " #"); i >= 0 {
			l = l[:i]
		}
		l = strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(l), "\\"))
		if l == "" || l[0] == '#' || l[0] == '-' {
			return
		}
		if name := pythonName(l); name != "" {
			deps[name] = l
		}
	})
	return deps, nil
}

// maxTOMLDepth is the deepest nesting of arrays and inline tables a
// TOML manifest may have: the decoder's work and memory grow fast with
// it (a few megabytes of "{a=" exhaust the memory of the machine).
const maxTOMLDepth = 64

// decodeTOML decodes data into v, refusing nesting deeper than
// maxTOMLDepth.
func decodeTOML(data []byte, v any) error {
	if tomlDepth(data) > maxTOMLDepth {
		return errors.New("nested too deep")
	}
	_, err := toml.Decode(string(data), v)
	return err
}

// decodeTOMLTable decodes data into a generic table.
func decodeTOMLTable(data []byte) (map[string]any, error) {
	var top map[string]any
	if err := decodeTOML(data, &top); err != nil {
		return nil, err
	}
	return top, nil
}

// tomlDepth is the deepest nesting of brackets and braces in data
// outside strings and comments: a bound on what the decoder will
// recurse into, not a validation.
func tomlDepth(data []byte) int {
	depth, deepest := 0, 0
	for i := 0; i < len(data); i++ {
		switch c := data[i]; c {
		case '#':
			for i < len(data) && data[i] != '\n' {
				i++
			}
		case '"', '\'':
			quote := string([]byte{c, c, c})
			if bytes.HasPrefix(data[i:], []byte(quote)) {
				end := bytes.Index(data[i+3:], []byte(quote))
				if end < 0 {
					return deepest
				}
				i += 3 + end + 2
				continue
			}
			for i++; i < len(data) && data[i] != c && data[i] != '\n'; i++ {
				if c == '"' && data[i] == '\\' {
					i++
				}
			}
		case '[', '{':
			depth++
			deepest = max(deepest, depth)
		case ']', '}':
			depth = max(depth-1, 0)
		}
	}
	return deepest
}

// table is t[key] as a table, or nil.
func table(t map[string]any, key string) map[string]any {
	m, _ := t[key].(map[string]any)
	return m
}

// addTableKeys adds each key of t to deps with its value, keys named by
// pythonName when python is set.
func addTableKeys(deps depSet, t map[string]any, python bool) {
	for name, v := range t {
		if python {
			if name == "python" {
				continue
			}
			name = pythonName(name)
		}
		if name != "" {
			deps[name] = fmt.Sprint(v)
		}
	}
}

// addRequirementList adds each PEP 508 string of list to deps.
func addRequirementList(deps depSet, list any) {
	items, _ := list.([]any)
	for _, it := range items {
		if s, ok := it.(string); ok {
			if name := pythonName(s); name != "" {
				deps[name] = s
			}
		}
	}
}

// parsePyproject reads pyproject.toml's dependencies: [project]
// dependencies and optional-dependencies, [dependency-groups],
// [build-system] requires, and Poetry's tables.
func parsePyproject(data []byte) (depSet, error) {
	top, err := decodeTOMLTable(data)
	if err != nil {
		return nil, err
	}
	deps := depSet{}
	project := table(top, "project")
	addRequirementList(deps, project["dependencies"])
	for _, list := range table(project, "optional-dependencies") {
		addRequirementList(deps, list)
	}
	for _, list := range table(top, "dependency-groups") {
		addRequirementList(deps, list)
	}
	addRequirementList(deps, table(top, "build-system")["requires"])
	poetry := table(table(top, "tool"), "poetry")
	addTableKeys(deps, table(poetry, "dependencies"), true)
	addTableKeys(deps, table(poetry, "dev-dependencies"), true)
	for _, g := range table(poetry, "group") {
		if g, ok := g.(map[string]any); ok {
			addTableKeys(deps, table(g, "dependencies"), true)
		}
	}
	return deps, nil
}

// parsePipfile reads Pipfile's packages and dev-packages.
func parsePipfile(data []byte) (depSet, error) {
	top, err := decodeTOMLTable(data)
	if err != nil {
		return nil, err
	}
	deps := depSet{}
	addTableKeys(deps, table(top, "packages"), true)
	addTableKeys(deps, table(top, "dev-packages"), true)
	return deps, nil
}

// parseCargoToml reads Cargo.toml's dependency tables, per target and of
// the workspace too.
func parseCargoToml(data []byte) (depSet, error) {
	top, err := decodeTOMLTable(data)
	if err != nil {
		return nil, err
	}
	deps := depSet{}
	addDeps := func(t map[string]any) {
		for _, k := range []string{"dependencies", "dev-dependencies", "build-dependencies", "dev_dependencies", "build_dependencies"} {
			addTableKeys(deps, table(t, k), false)
		}
	}
	addDeps(top)
	addDeps(table(top, "workspace"))
	for _, t := range table(top, "target") {
		if t, ok := t.(map[string]any); ok {
			addDeps(t)
		}
	}
	addTableKeys(deps, table(top, "patch"), false)
	return deps, nil
}

// parseTOMLPackages reads the [[package]] array of Cargo.lock,
// poetry.lock, uv.lock and pdm.lock.
func parseTOMLPackages(data []byte) (depSet, error) {
	var lock struct {
		Package []struct {
			Name     string `toml:"name"`
			Version  string `toml:"version"`
			Checksum string `toml:"checksum"`
			Source   any    `toml:"source"`
		} `toml:"package"`
	}
	if err := decodeTOML(data, &lock); err != nil {
		return nil, err
	}
	pins := map[string][]string{}
	for _, p := range lock.Package {
		if p.Name != "" {
			pins[p.Name] = append(pins[p.Name], fmt.Sprint(p.Version, " ", p.Checksum, " ", p.Source, "\n"))
		}
	}
	return pinsOf(pins), nil
}

// parseVersionCatalog reads gradle/libs.versions.toml's libraries and
// plugins.
func parseVersionCatalog(data []byte) (depSet, error) {
	top, err := decodeTOMLTable(data)
	if err != nil {
		return nil, err
	}
	deps := depSet{}
	for _, k := range []string{"libraries", "plugins"} {
		for alias, v := range table(top, k) {
			name := alias
			if m, ok := v.(map[string]any); ok {
				if mod, ok := m["module"].(string); ok {
					name = mod
				} else if id, ok := m["id"].(string); ok {
					name = id
				} else if g, ok := m["group"].(string); ok {
					name = g + ":" + fmt.Sprint(m["name"])
				}
			} else if s, ok := v.(string); ok {
				if i := strings.LastIndex(s, ":"); i > 0 {
					name = s[:i]
				}
			}
			deps[name] = fmt.Sprint(v)
		}
	}
	return deps, nil
}

var gemLine = regexp.MustCompile(`^\s*gem\s*\(?\s*["']([^"']+)["'](.*)$`)

// parseGemfile reads the gem lines of a Gemfile.
func parseGemfile(data []byte) (depSet, error) {
	deps := depSet{}
	eachLine(data, func(l string) {
		if m := gemLine.FindStringSubmatch(l); m != nil {
			deps[m[1]] = strings.TrimSpace(m[2])
		}
	})
	return deps, nil
}

var gemLockLine = regexp.MustCompile(`^    ([^ (]+) \(([^)]*)\)$`)

// parseGemfileLock reads the specs of Gemfile.lock ("    rake (13.0.6)").
func parseGemfileLock(data []byte) (depSet, error) {
	pins := map[string][]string{}
	eachLine(data, func(l string) {
		if m := gemLockLine.FindStringSubmatch(l); m != nil {
			pins[m[1]] = append(pins[m[1]], m[2]+"\n")
		}
	})
	return pinsOf(pins), nil
}

var gradleDep = regexp.MustCompile(`\b(?:implementation|api|compileOnly|runtimeOnly|testImplementation|testRuntimeOnly|testCompileOnly|annotationProcessor|kapt|ksp|classpath|compile|testCompile|runtime|androidTestImplementation|debugImplementation|releaseImplementation|developmentOnly|testFixturesImplementation)\s*\(?\s*(?:platform\s*\(\s*)?["']([^"':\s]+):([^"':\s]+)(?::([^"'\s]*))?["']`)

var gradleCatalogDep = regexp.MustCompile(`\b(?:implementation|api|compileOnly|runtimeOnly|testImplementation|testRuntimeOnly|annotationProcessor|kapt|ksp|classpath)\s*\(?\s*(libs\.[A-Za-z0-9_.]+)`)

// parseGradle reads the dependency declarations of a Gradle build script
// that name their coordinates in a string ("group:name:version") or a
// version catalog alias (libs.x.y).
func parseGradle(data []byte) (depSet, error) {
	deps := depSet{}
	eachLine(data, func(l string) {
		for _, m := range gradleDep.FindAllStringSubmatch(l, -1) {
			deps[m[1]+":"+m[2]] = m[3]
		}
		for _, m := range gradleCatalogDep.FindAllStringSubmatch(l, -1) {
			deps[m[1]] = ""
		}
	})
	return deps, nil
}

// maxXMLDepth bounds how deep parseXMLDeps follows elements.
const maxXMLDepth = 64

// parseXMLDeps reads Maven's <dependency> elements (groupId:artifactId,
// wherever they are: dependencies, dependency management, plugins) and
// NuGet's PackageReference and PackageVersion elements.
func parseXMLDeps(data []byte) (depSet, error) {
	deps := depSet{}
	d := xml.NewDecoder(bytes.NewReader(data))
	d.Strict = false
	d.CharsetReader = func(_ string, r io.Reader) (io.Reader, error) { return r, nil }
	var stack []string
	var dep map[string]string // the <dependency> being read
	var text strings.Builder
	for {
		tok, err := d.Token()
		if err == io.EOF {
			return deps, nil
		}
		if err != nil {
			return nil, err
		}
		switch t := tok.(type) {
		case xml.StartElement:
			if len(stack) >= maxXMLDepth {
				return nil, errors.New("nested too deep")
			}
			stack = append(stack, t.Name.Local)
			text.Reset()
			switch t.Name.Local {
			case "dependency":
				dep = map[string]string{}
			case "PackageReference", "PackageVersion":
				var name, version string
				for _, a := range t.Attr {
					switch a.Name.Local {
					case "Include", "Update":
						name = a.Value
					case "Version", "VersionOverride":
						version = a.Value
					}
				}
				if name != "" {
					deps[name] = version
				}
			}
		case xml.CharData:
			if text.Len() < 1024 {
				text.Write(t)
			}
		case xml.EndElement:
			if len(stack) == 0 {
				continue
			}
			name := stack[len(stack)-1]
			stack = stack[:len(stack)-1]
			switch {
			case name == "dependency" && dep != nil:
				if dep["artifactId"] != "" {
					deps[dep["groupId"]+":"+dep["artifactId"]] = dep["version"] + " " + dep["scope"] + " " + dep["type"] + " " + dep["classifier"]
				}
				dep = nil
			case dep != nil && len(stack) > 0 && stack[len(stack)-1] == "dependency":
				dep[name] = strings.TrimSpace(text.String())
			}
			text.Reset()
		}
	}
}
