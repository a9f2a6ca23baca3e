package review

import (
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// depCase is a manifest change and the names its FlagDependency must
// list; noFlag when the change must not be flagged at all.
type depCase struct {
	name                    string
	path                    string
	old, new                string
	added, removed, changed []string
	reason                  string // words the reason must hold
	noFlag                  bool
}

func checkDeps(t *testing.T, cases []depCase) {
	t.Helper()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := fileOf(t, c.path, c.old, c.new)
			var fl *Flag
			for i := range f.Flags {
				if f.Flags[i].Kind == FlagDependency {
					fl = &f.Flags[i]
				}
			}
			if c.noFlag {
				if fl != nil {
					t.Fatalf("flagged: %+v", *fl)
				}
				return
			}
			if fl == nil {
				t.Fatalf("no dependency flag: %+v", f.Flags)
			}
			got := [3][]string{fl.Added, fl.Removed, fl.Changed}
			if diff := cmp.Diff([3][]string{c.added, c.removed, c.changed}, got); diff != "" {
				t.Errorf("added, removed, changed (-want +got):\n%s\nreason: %s", diff, fl.Reason)
			}
			if !strings.Contains(fl.Reason, c.reason) {
				t.Errorf("reason %q lacks %q", fl.Reason, c.reason)
			}
			if strings.ContainsAny(fl.Reason, "\n\r") {
				t.Errorf("reason spans lines: %q", fl.Reason)
			}
		})
	}
}

func TestDependencyNames(t *testing.T) {
	goMod := "module example.com/x\n\ngo 1.22\n\nrequire (\n\tgithub.com/a/b v1.2.0\n\tgolang.org/x/text v0.14.0 // indirect\n)\n\nrequire github.com/c/d v0.1.0\n"
	checkDeps(t, []depCase{
		{name: "go.mod added", path: "go.mod", old: goMod, new: strings.Replace(goMod, "require github.com/c/d v0.1.0\n", "require github.com/c/d v0.1.0\nrequire github.com/evil/e v0.0.1\n", 1),
			added: []string{"github.com/evil/e"}, reason: "dependencies: go.mod changed: added github.com/evil/e"},
		{name: "go.mod removed and bumped", path: "sub/go.mod", old: goMod, new: strings.Replace(strings.Replace(goMod, "\tgithub.com/a/b v1.2.0\n", "", 1), "v0.14.0", "v0.15.0", 1),
			removed: []string{"github.com/a/b"}, changed: []string{"golang.org/x/text"}, reason: "removed github.com/a/b; other version golang.org/x/text"},
		{name: "go.mod replace", path: "go.mod", old: goMod, new: goMod + "\nreplace github.com/a/b => ../fork\n",
			added: []string{"replace github.com/a/b"}, reason: "added github.com/a/b (replaced)"},
		{name: "go.mod comment only", path: "go.mod", old: goMod, new: goMod + "// a comment\n", noFlag: true},
		{name: "go.mod new", path: "go.mod", old: absent, new: "module x\n\nrequire github.com/a/b v1\n", added: []string{"github.com/a/b"}, reason: "go.mod added: added github.com/a/b"},
		{name: "go.mod deleted", path: "go.mod", old: "module x\n\nrequire github.com/a/b v1\n", new: absent, removed: []string{"github.com/a/b"}, reason: "go.mod deleted: removed github.com/a/b"},
		{name: "go.sum checksum changed", path: "go.sum", old: "github.com/a/b v1.2.0 h1:AAA=\ngithub.com/a/b v1.2.0/go.mod h1:BBB=\n",
			new:   "github.com/a/b v1.2.0 h1:ZZZ=\ngithub.com/a/b v1.2.0/go.mod h1:BBB=\ngithub.com/c/d v0.1.0 h1:CCC=\n",
			added: []string{"github.com/c/d"}, changed: []string{"github.com/a/b"}, reason: "lockfile go.sum changed: added github.com/c/d; other version github.com/a/b"},
		{name: "package.json", path: "web/package.json",
			old:   `{"name": "w", "dependencies": {"react": "^18.0.0", "lodash": "^4"}, "devDependencies": {"jest": "^29"}}`,
			new:   `{"name": "w", "dependencies": {"react": "^18.2.0", "left-pad": "^1.3.0"}, "devDependencies": {"jest": "^29", "@types/node": "^20"}}`,
			added: []string{"@types/node", "left-pad"}, removed: []string{"lodash"}, changed: []string{"react"}, reason: "added @types/node, left-pad; removed lodash; other version react"},
		{name: "package.json description only", path: "package.json", old: `{"description": "a", "dependencies": {"x": "1"}}`, new: `{"description": "b", "dependencies": {"x": "1"}}`, noFlag: true},
		{name: "package-lock v3", path: "package-lock.json",
			old:   `{"lockfileVersion": 3, "packages": {"": {"name": "w"}, "node_modules/lodash": {"version": "4.17.21"}, "node_modules/a/node_modules/lodash": {"version": "3.0.0"}}}`,
			new:   `{"lockfileVersion": 3, "packages": {"": {"name": "w"}, "node_modules/lodash": {"version": "4.17.21"}, "node_modules/left-pad": {"version": "1.3.0"}}}`,
			added: []string{"left-pad"}, changed: []string{"lodash"}},
		{name: "package-lock v1", path: "package-lock.json", old: `{"dependencies": {"a": {"version": "1.0.0"}}}`, new: `{"dependencies": {"b": {"version": "1.0.0"}}}`,
			added: []string{"b"}, removed: []string{"a"}},
		{name: "yarn.lock classic", path: "yarn.lock",
			old:   "# yarn lockfile v1\n\n\"@babel/core@^7.0.0\", \"@babel/core@^7.1.0\":\n  version \"7.1.0\"\n  integrity sha512-x\n\nlodash@^4.17.0:\n  version \"4.17.21\"\n",
			new:   "# yarn lockfile v1\n\n\"@babel/core@^7.0.0\", \"@babel/core@^7.1.0\":\n  version \"7.2.0\"\n  integrity sha512-y\n\nleft-pad@^1.3.0:\n  version \"1.3.0\"\n",
			added: []string{"left-pad"}, removed: []string{"lodash"}, changed: []string{"@babel/core"}},
		{name: "yarn.lock berry", path: "yarn.lock", old: "__metadata:\n  version: 6\n", new: "__metadata:\n  version: 6\n\n\"left-pad@npm:^1.3.0\":\n  version: 1.3.0\n  checksum: abc\n",
			added: []string{"left-pad"}},
		{name: "pnpm lock without names", path: "pnpm-lock.yaml", old: "lockfileVersion: '9.0'\n", new: "lockfileVersion: '9.0'\npackages: {}\n", reason: "lockfile pnpm-lock.yaml changed: the exact versions installed change"},
		{name: "requirements", path: "requirements.txt", old: "# pinned\nrequests==2.31.0\nDjango>=4.2 ; python_version >= '3.8'\n-r base.txt\n",
			new:   "# pinned\nrequests==2.32.0\nflask[async]==3.0\n-r base.txt\n--hash=sha256:abc\n",
			added: []string{"flask"}, removed: []string{"django"}, changed: []string{"requests"}},
		{name: "requirements-dev and folder", path: "requirements/dev.txt", old: absent, new: "pytest_cov==5\n", added: []string{"pytest-cov"}},
		{name: "dev-requirements", path: "dev-requirements.txt", old: "black\n", new: "black\nruff\n", added: []string{"ruff"}, reason: "dependencies: dev-requirements.txt changed: added ruff"},
		{name: "odd requirements name", path: "requirements \x1b[2J.txt", old: "a\n", new: "a\nb\n", added: []string{"b"}, reason: `dependencies: "requirements \x1b[2J.txt" changed: added b`},
		{name: "pyproject", path: "pyproject.toml",
			old:   "[project]\nname = \"x\"\ndependencies = [\"requests>=2\", \"click\"]\n\n[project.optional-dependencies]\ntest = [\"pytest\"]\n\n[build-system]\nrequires = [\"hatchling\"]\n",
			new:   "[project]\nname = \"x\"\ndependencies = [\"requests>=2\", \"httpx\"]\n\n[project.optional-dependencies]\ntest = [\"pytest\", \"pytest-xdist\"]\n\n[build-system]\nrequires = [\"setuptools\"]\n",
			added: []string{"httpx", "pytest-xdist", "setuptools"}, removed: []string{"click", "hatchling"}},
		{name: "pyproject poetry", path: "pyproject.toml",
			old:   "[tool.poetry.dependencies]\npython = \"^3.11\"\nrequests = \"^2\"\n",
			new:   "[tool.poetry.dependencies]\npython = \"^3.12\"\nrequests = \"^2\"\n\n[tool.poetry.group.dev.dependencies]\nPyTest = \"^8\"\n",
			added: []string{"pytest"}},
		{name: "pyproject name only", path: "pyproject.toml", old: "[project]\nname = \"x\"\n", new: "[project]\nname = \"y\"\n", noFlag: true},
		{name: "Pipfile", path: "Pipfile", old: "[packages]\nrequests = \"*\"\n", new: "[packages]\nrequests = \"*\"\n\n[dev-packages]\nblack = \"*\"\n", added: []string{"black"}},
		{name: "Pipfile.lock", path: "Pipfile.lock", old: `{"default": {"requests": {"version": "==2.31.0"}}, "develop": {}}`, new: `{"default": {"requests": {"version": "==2.32.0"}}, "develop": {"black": {}}}`,
			added: []string{"black"}, changed: []string{"requests"}},
		{name: "poetry.lock", path: "poetry.lock", old: "[[package]]\nname = \"requests\"\nversion = \"2.31.0\"\n",
			new: "[[package]]\nname = \"requests\"\nversion = \"2.31.0\"\n\n[[package]]\nname = \"urllib3\"\nversion = \"2.0.0\"\n", added: []string{"urllib3"}},
		{name: "Cargo.toml", path: "crates/x/Cargo.toml",
			old:   "[package]\nname = \"x\"\n\n[dependencies]\nserde = \"1\"\n\n[dev-dependencies]\ninsta = \"1\"\n",
			new:   "[package]\nname = \"x\"\n\n[dependencies]\nserde = { version = \"1\", features = [\"derive\"] }\nreqwest = \"0.12\"\n\n[target.'cfg(unix)'.dependencies]\nnix = \"0.29\"\n",
			added: []string{"nix", "reqwest"}, removed: []string{"insta"}, changed: []string{"serde"}},
		{name: "Cargo.lock", path: "Cargo.lock", old: "version = 3\n\n[[package]]\nname = \"serde\"\nversion = \"1.0.0\"\nchecksum = \"aa\"\n",
			new: "version = 3\n\n[[package]]\nname = \"serde\"\nversion = \"1.0.0\"\nchecksum = \"bb\"\n", changed: []string{"serde"}},
		{name: "Gemfile", path: "Gemfile", old: "source 'https://rubygems.org'\ngem 'rails', '~> 7.1'\n", new: "source 'https://rubygems.org'\ngem 'rails', '~> 7.1'\ngem \"pry\", group: :development\n",
			added: []string{"pry"}},
		{name: "Gemfile.lock", path: "Gemfile.lock", old: "GEM\n  specs:\n    rake (13.0.6)\n    rails (7.1.0)\n      rake\n", new: "GEM\n  specs:\n    rake (13.1.0)\n",
			removed: []string{"rails"}, changed: []string{"rake"}},
		{name: "pom.xml", path: "pom.xml",
			old:   "<project><dependencies><dependency><groupId>junit</groupId><artifactId>junit</artifactId><version>4.13</version></dependency></dependencies></project>",
			new:   "<?xml version=\"1.0\" encoding=\"ISO-8859-1\"?>\n<project><dependencies>\n<dependency><groupId>org.junit</groupId><artifactId>junit-jupiter</artifactId></dependency>\n</dependencies></project>",
			added: []string{"org.junit:junit-jupiter"}, removed: []string{"junit:junit"}},
		{name: "build.gradle", path: "app/build.gradle",
			old:   "dependencies {\n    implementation 'com.squareup.okhttp3:okhttp:4.12.0'\n}\n",
			new:   "dependencies {\n    implementation 'com.squareup.okhttp3:okhttp:4.12.0'\n    testImplementation(\"org.mockito:mockito-core:5.0.0\")\n    implementation(libs.retrofit)\n}\n",
			added: []string{"libs.retrofit", "org.mockito:mockito-core"}},
		{name: "build.gradle.kts", path: "build.gradle.kts", old: "dependencies {\n    api(\"a:b:1\")\n}\n", new: "dependencies {\n    api(\"a:b:2\")\n}\n", changed: []string{"a:b"}},
		{name: "version catalog", path: "gradle/libs.versions.toml", old: "[libraries]\nokhttp = \"com.squareup.okhttp3:okhttp:4.12.0\"\n",
			new: "[libraries]\nokhttp = \"com.squareup.okhttp3:okhttp:4.12.0\"\nretrofit = { module = \"com.squareup.retrofit2:retrofit\", version = \"2.11.0\" }\n", added: []string{"com.squareup.retrofit2:retrofit"}},
		{name: "composer.json", path: "composer.json", old: `{"require": {"php": ">=8.1"}}`, new: `{"require": {"php": ">=8.1", "guzzlehttp/guzzle": "^7"}}`, added: []string{"guzzlehttp/guzzle"}},
		{name: "composer.lock", path: "composer.lock", old: `{"packages": [{"name": "a/b", "version": "1"}]}`, new: `{"packages": [], "packages-dev": [{"name": "c/d", "version": "1"}]}`,
			added: []string{"c/d"}, removed: []string{"a/b"}},
		{name: "csproj", path: "src/App.csproj", old: "<Project><ItemGroup><PackageReference Include=\"Newtonsoft.Json\" Version=\"13.0.1\" /></ItemGroup></Project>",
			new:   "<Project><ItemGroup><PackageReference Include=\"Newtonsoft.Json\" Version=\"13.0.3\" /><PackageReference Include=\"Serilog\" Version=\"3\" /></ItemGroup></Project>",
			added: []string{"Serilog"}, changed: []string{"Newtonsoft.Json"}},
		{name: "Package.swift without names", path: "Package.swift", old: "a\n", new: "b\n", reason: "Package.swift changed: its dependencies are not listed here"},
		// Other people's manifests and fixtures are not the project's.
		{name: "vendored go.mod", path: "vendor/github.com/a/b/go.mod", old: "module b\n", new: "module b\n\nrequire c v1\n", noFlag: true},
		{name: "node_modules package.json", path: "node_modules/a/package.json", old: `{}`, new: `{"dependencies": {"b": "1"}}`, noFlag: true},
		{name: "lockfile in testdata", path: "internal/testdata/yarn.lock", old: "a@1:\n  version \"1\"\n", new: "b@1:\n  version \"1\"\n", noFlag: true},
		{name: "not a manifest", path: "docs/go.mod.md", old: "a\n", new: "b\n", noFlag: true},
	})
}

// Whatever the guest writes in a manifest, the flag is computed without
// a panic, in bounded time, and its reason is one line that quotes odd
// names.
func TestDependencyHostile(t *testing.T) {
	deep := `{"dependencies": {"a": ` + strings.Repeat("[", 20000) + strings.Repeat("]", 20000) + `}}`
	checkDeps(t, []depCase{
		{name: "deeply nested json", path: "package.json", old: `{}`, new: deep, reason: "it does not parse, its dependencies are not listed"},
		{name: "not json", path: "package.json", old: `{"dependencies": {}}`, new: "<<<<<<< HEAD\n", reason: "does not parse"},
		{name: "json array", path: "package.json", old: `{}`, new: `[1, 2]`, reason: "does not parse"},
		{name: "binary in a manifest", path: "go.mod", old: "module x\n", new: "module x\n\x00\x01\x02", reason: "not text, its dependencies are not listed"},
		{name: "bad toml", path: "Cargo.toml", old: "[dependencies]\na = \"1\"\n", new: "[dependencies\na = ", reason: "does not parse"},
		{name: "deep toml", path: "Cargo.toml", old: "", new: "[dependencies]\na = " + strings.Repeat("[", 5000) + strings.Repeat("]", 5000) + "\n", reason: "does not parse"},
		// Before the depth check, these 3 MB took all the machine's memory.
		{name: "deep inline tables", path: "Cargo.toml", old: "", new: "[dependencies]\na = " + strings.Repeat("{a=", 1<<20) + "\n", reason: "does not parse"},
		{name: "brackets in strings and comments", path: "Cargo.toml", old: "",
			new: "# " + strings.Repeat("[", 100) + "\n[dependencies]\na = \"" + strings.Repeat("{", 100) + "\"\nb = '''" + strings.Repeat("[", 100) + "'''\n", added: []string{"a", "b"}},
		{name: "deep xml", path: "pom.xml", old: "<project/>", new: strings.Repeat("<a>", 10000) + strings.Repeat("</a>", 10000), reason: "does not parse"},
		{name: "name with a newline", path: "package.json", old: `{}`, new: `{"dependencies": {"evil\n# diff --git a/x b/x": "1"}}`,
			added: []string{"evil\n# diff --git a/x b/x"}, reason: `added "evil\n# diff --git a/x b/x"`},
		{name: "name with escapes", path: "package.json", old: `{}`, new: `{"dependencies": {"\u001b[31mred\u202e": "1"}}`,
			added: []string{"\x1b[31mred\u202e"}, reason: `added "\x1b[31mred\u202e"`},
		{name: "huge line", path: "requirements.txt", old: "", new: strings.Repeat("a", 1<<20) + "\nb==1\n", added: []string{strings.Repeat("a", maxScanLineBytes), "b"}},
		{name: "too large", path: "go.mod", old: "module x\n", new: "module x\n" + strings.Repeat("// pad\n", maxManifestBytes/7+1), reason: "too large to list its dependencies"},
	})
	// A long list is cut in the reason, never in count.
	var b strings.Builder
	b.WriteString(`{"dependencies": {`)
	for i := range 700 {
		if i > 0 {
			b.WriteString(",")
		}
		b.WriteString(`"p` + strings.Repeat("x", i%7) + string(rune('a'+i%26)) + `-` + strconv.Itoa(i) + `": "1"`)
	}
	b.WriteString("}}")
	f := fileOf(t, "package.json", `{}`, b.String())
	fl := f.Flags[0]
	if len(fl.Added) != maxNames || !strings.Contains(fl.Reason, "… (700 in all)") {
		t.Errorf("%d names, reason %q", len(fl.Added), fl.Reason)
	}
}
