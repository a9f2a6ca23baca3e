package review

import (
	"context"
	"strings"
	"testing"

	"github.com/airlock-dev/airlock/sync/manifest"
)

// depParsers are every manifest parser, for the fuzzer to pick from.
var depParsers = []depParser{
	parseGoMod, parseGoSum, parsePackageJSON, parsePackageLock, parseYarnLock, parseRequirements,
	parsePyproject, parsePipfile, parsePipfileLock, parseCargoToml, parseTOMLPackages, parseVersionCatalog,
	parseGemfile, parseGemfileLock, parseGradle, parseXMLDeps, parseComposerJSON, parseComposerLock,
}

// FuzzDependencyParsers feeds hostile bytes to each manifest parser
// directly (without parseSafely's recover): none may panic.
func FuzzDependencyParsers(f *testing.F) {
	for _, seed := range []string{
		"module x\nrequire (\n\ta v1\n)\nreplace a => b v2\n",
		"a v1 h1:x=\n",
		`{"dependencies": {"a": "1"}, "packages": {"node_modules/a": {"version": "1"}}}`,
		"\"a@^1\", a@^2:\n  version \"1\"\n",
		"requests[socks]>=2 ; python_version<'3.8'\n-r x.txt\n",
		"[project]\ndependencies = [\"a\"]\n[tool.poetry.group.dev.dependencies]\nb = \"1\"\n",
		"[[package]]\nname = \"a\"\nversion = \"1\"\n",
		"[dependencies]\na = { version = \"1\" }\n[target.'cfg(unix)'.dependencies]\nb = \"1\"\n",
		"[libraries]\na = { module = \"g:a\" }\n",
		"gem 'a', '1'\n",
		"    a (1.0)\n",
		"implementation 'g:a:1'\n",
		"<project><dependency><groupId>g</groupId><artifactId>a</artifactId></dependency><PackageReference Include=\"x\"/></project>",
		`{"require": {"a/b": "1"}, "packages": [{"name": "a/b"}]}`,
	} {
		for i := range depParsers {
			f.Add([]byte(seed), uint8(i))
		}
	}
	f.Fuzz(func(t *testing.T, data []byte, which uint8) {
		if len(data) > 1<<16 {
			return
		}
		parse := depParsers[int(which)%len(depParsers)]
		_, _ = parse(data)
	})
}

// FuzzSecondLook builds a changeset of one hostile change under a path
// that makes it a manifest, a test or anything else: it never panics,
// and every reason stays one line (it becomes a "# " line of the patch).
func FuzzSecondLook(f *testing.F) {
	paths := []string{"go.mod", "package.json", "yarn.lock", "Cargo.toml", "pom.xml", "requirements.txt", "pyproject.toml",
		"a_test.go", "tests/test_a.py", "a.test.ts", "ATest.java", "tests/a.rs", ".drone.yml", "settings.py", "a.pb.go", "big.txt"}
	f.Add([]byte("module x\n"), []byte("module x\nrequire a v1\n"), uint8(0))
	f.Add([]byte("func TestA(t *testing.T) {\n\tassert(x)\n}\n"), []byte("func TestA(t *testing.T) {\n\tt.Skip()\n\t// assert(x)\n}\n"), uint8(7))
	f.Add([]byte(""), []byte("SECRET = 'q8Zr3Lx0Vb7Nw2Tk5Yp9Hm4Jc6Ds1Gf'\nghp_aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\n"), uint8(13))
	f.Add([]byte("it('a', () => {})\n"), []byte("it.only('a\\n', () => {})\nfit('b')\n"), uint8(9))
	f.Fuzz(func(t *testing.T, old, new []byte, which uint8) {
		if len(old) > 1<<16 || len(new) > 1<<16 {
			return
		}
		p := paths[int(which)%len(paths)]
		s := store{}
		c := manifest.Change{Path: p, Kind: manifest.Modified, Old: entry(s, p, string(old), 0o644), New: entry(s, p, string(new), 0o644)}
		if string(old) == string(new) {
			return
		}
		cs, err := New(context.Background(), []manifest.Change{c}, s.source, Options{})
		if err != nil {
			t.Fatal(err)
		}
		for _, fl := range cs.Files[0].Flags {
			if strings.ContainsAny(fl.Reason, "\n\r") {
				t.Fatalf("%s reason spans lines: %q", fl.Kind, fl.Reason)
			}
		}
		_ = cs.SecondLook().String()
	})
}
