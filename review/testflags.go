package review

import (
	"fmt"
	"path"
	"regexp"
	"sort"
	"strings"
)

// Tests deleted, skipped or narrowed: a test file deleted or renamed out
// of the runner's sight, test functions removed, markers that skip or
// focus tests in added lines, assertions that come back commented out.
// Markers are matched per language, on added lines that are not
// comments; a marker line that the same change removes elsewhere in the
// file (a move) does not count.

// IsTestFile reports whether p is named as a test by its language's
// usual runner (foo_test.go, test_foo.py, foo.test.ts, FooTest.java,
// tests/*.rs, foo_spec.rb…).
func IsTestFile(p string) bool {
	base := path.Base(p)
	ext := path.Ext(base)
	stem := strings.TrimSuffix(base, ext)
	dirs := strings.Split(path.Dir(p), "/")
	inDir := func(names ...string) bool {
		for _, d := range dirs {
			for _, n := range names {
				if d == n {
					return true
				}
			}
		}
		return false
	}
	switch ext {
	case ".go":
		return strings.HasSuffix(stem, "_test")
	case ".py":
		return strings.HasPrefix(stem, "test_") || strings.HasSuffix(stem, "_test") || stem == "tests" ||
			(inDir("tests", "test") && stem != "__init__" && stem != "conftest")
	case ".js", ".jsx", ".ts", ".tsx", ".mjs", ".cjs", ".mts", ".cts", ".vue", ".svelte":
		return strings.Contains(base, ".test.") || strings.Contains(base, ".spec.") || strings.Contains(base, ".cy.") ||
			strings.Contains(base, ".e2e.") || inDir("__tests__")
	case ".java", ".kt", ".kts", ".groovy", ".scala":
		return strings.HasSuffix(stem, "Test") || strings.HasSuffix(stem, "Tests") || strings.HasSuffix(stem, "IT") ||
			strings.HasSuffix(stem, "Spec") || strings.HasSuffix(stem, "Suite") || strings.Contains(p, "src/test/")
	case ".rs":
		return inDir("tests") || strings.HasSuffix(stem, "_test") || stem == "tests"
	case ".rb":
		return strings.HasSuffix(stem, "_spec") || strings.HasSuffix(stem, "_test") || strings.HasPrefix(stem, "test_")
	case ".cs", ".fs", ".vb", ".swift", ".php":
		return strings.HasSuffix(stem, "Test") || strings.HasSuffix(stem, "Tests")
	case ".exs":
		return strings.HasSuffix(stem, "_test")
	case ".c", ".cc", ".cpp", ".cxx", ".h", ".hpp":
		return strings.HasSuffix(stem, "_test") || strings.HasSuffix(stem, "_unittest") || strings.HasPrefix(stem, "test_")
	case ".sh", ".bats":
		return strings.HasSuffix(stem, "_test") || ext == ".bats"
	}
	return false
}

// testMarker is a construct that skips or focuses tests.
type testMarker struct {
	label string         // shown: "t.Skip", "it.only"
	re    *regexp.Regexp // matched against an added line
}

// markerSet is what skips and what focuses tests in one language.
type markerSet struct {
	testsOnly bool // only in files IsTestFile names
	skip      []testMarker
	focus     []testMarker
}

func m(label, re string) testMarker { return testMarker{label, regexp.MustCompile(re)} }

var (
	goMarkers = markerSet{testsOnly: true, skip: []testMarker{
		m("t.Skip", `\b[a-z]\w*\.Skip(?:Now|f)?\(`),
	}}
	pythonMarkers = markerSet{skip: []testMarker{
		m("@pytest.mark.skip", `@pytest\.mark\.skip\b`),
		m("@pytest.mark.skipif", `@pytest\.mark\.skipif\b`),
		m("@pytest.mark.xfail", `@pytest\.mark\.xfail\b`),
		m("pytest.skip", `\bpytest\.(?:skip|xfail)\(`),
		m("@unittest.skip", `@(?:unittest\.)?skip(?:If|Unless)?\b`),
		m("skipTest", `\.skipTest\(`),
		m("raise SkipTest", `\braise\s+(?:unittest\.)?SkipTest\b`),
	}}
	jsMarkers = markerSet{skip: []testMarker{
		m("it.skip", `\b(?:describe|it|test|context|suite|specify)\.(?:skip|todo)\b`),
		m("xit", `(?:^|[^\w.$])x(?:it|describe|test|context|specify)\s*\(`),
	}, focus: []testMarker{
		m(".only", `\b(?:describe|it|test|context|suite|specify|fixture)\.only\b`),
		m("fit", `(?:^|[^\w.$])f(?:it|describe|context)\s*\(`),
	}}
	jvmMarkers = markerSet{skip: []testMarker{
		m("@Ignore", `@Ignore\b`),
		m("@Disabled", `@Disabled(?:If\w*|On\w*)?\b`),
	}}
	dotnetMarkers = markerSet{skip: []testMarker{
		m("[Ignore]", `\[\s*Ignore\b`),
		m("Skip =", `\b(?:Fact|Theory)\s*\(\s*Skip\s*=`),
	}}
	rustMarkers = markerSet{skip: []testMarker{
		m("#[ignore]", `#\[\s*ignore\b`),
	}}
	rubyMarkers = markerSet{testsOnly: true, skip: []testMarker{
		m("xit", `^\s*x(?:it|describe|context|specify)\b`),
		m("skip", `^\s*(?:skip|pending)\b`),
	}, focus: []testMarker{
		m("fit", `^\s*f(?:it|describe|context)\b`),
		m("focus: true", `(?:\bfocus:\s*true|,\s*:focus\b)`),
	}}
	phpMarkers = markerSet{skip: []testMarker{
		m("markTestSkipped", `\bmarkTest(?:Skipped|Incomplete)\(`),
	}}
	elixirMarkers = markerSet{skip: []testMarker{
		m("@tag :skip", `@(?:module)?tag\s+:skip\b`),
	}}
	swiftMarkers = markerSet{skip: []testMarker{
		m("XCTSkip", `\bXCTSkip(?:If|Unless)?\b`),
	}}
	cppMarkers = markerSet{skip: []testMarker{
		m("DISABLED_", `\bTEST(?:_F|_P)?\s*\(\s*\w+\s*,\s*DISABLED_`),
		m("GTEST_SKIP", `\bGTEST_SKIP\b`),
	}}
)

// markersOf returns the markers of p's language.
func markersOf(p string) (markerSet, bool) {
	switch path.Ext(p) {
	case ".go":
		return goMarkers, true
	case ".py":
		return pythonMarkers, true
	case ".js", ".jsx", ".ts", ".tsx", ".mjs", ".cjs", ".mts", ".cts", ".vue", ".svelte":
		return jsMarkers, true
	case ".java", ".kt", ".kts", ".groovy", ".scala":
		return jvmMarkers, true
	case ".cs", ".fs", ".vb":
		return dotnetMarkers, true
	case ".rs":
		return rustMarkers, true
	case ".rb":
		return rubyMarkers, true
	case ".php":
		return phpMarkers, true
	case ".exs", ".ex":
		return elixirMarkers, true
	case ".swift":
		return swiftMarkers, true
	case ".c", ".cc", ".cpp", ".cxx":
		return cppMarkers, true
	}
	return markerSet{}, false
}

// commentPrefixesOf are what start a line comment in p's language.
func commentPrefixesOf(p string) []string {
	switch path.Ext(p) {
	case ".go", ".js", ".jsx", ".ts", ".tsx", ".mjs", ".cjs", ".mts", ".cts", ".vue", ".svelte",
		".java", ".kt", ".kts", ".groovy", ".scala", ".cs", ".fs", ".rs", ".swift",
		".c", ".cc", ".cpp", ".cxx", ".h", ".hpp", ".dart":
		return []string{"//", "/*", "*"}
	case ".py", ".rb", ".sh", ".bash", ".bats", ".ex", ".exs", ".yml", ".yaml", ".toml", ".pl", ".r", ".R":
		return []string{"#"}
	case ".php":
		return []string{"//", "#", "/*", "*"}
	case ".sql", ".lua", ".hs":
		return []string{"--"}
	}
	return []string{"//", "#", "/*", "--"}
}

// uncommented is line without its leading comment marker (of the
// language of p) and the spaces around, and whether it had one.
func uncommented(p, line string) (string, bool) {
	t := strings.TrimSpace(line)
	for _, c := range commentPrefixesOf(p) {
		if rest, ok := strings.CutPrefix(t, c); ok {
			if c == "*" && rest != "" && rest[0] != ' ' && rest[0] != '\t' {
				continue // a pointer, not a comment's continuation
			}
			rest = strings.TrimSuffix(strings.TrimSpace(rest), "*/")
			return strings.TrimSpace(rest), true
		}
	}
	return t, false
}

// assertion matches a line that checks something in a test.
var assertion = regexp.MustCompile(`\b(?:assert\w*|Assert\w*|expect\w*|require\.\w+|[tbf]\.(?:Error|Errorf|Fatal|Fatalf|Fail|FailNow)|self\.assert\w*|should\w*|XCTAssert\w*|EXPECT_\w+|ASSERT_\w+|verify)\b`)

// Test function declarations whose removal is a test removed: Go's Test
// and Fuzz functions, Python's test functions and methods, and the
// titles of JavaScript's it() and test() (skipped or focused ones too).
var (
	goTestFunc = regexp.MustCompile(`^func\s+((?:Test|Fuzz)[A-Z0-9_]\w*|Test|Fuzz)\s*\(`)
	pyTestFunc = regexp.MustCompile(`^\s*(?:async\s+)?def\s+(test\w*)\s*\(`)
	jsTestCase = regexp.MustCompile(`^\s*(?:[xf]?it|[xf]?test)(?:\.(?:skip|only|todo))?\s*\(\s*(['"` + "`" + `])(.+?)['"` + "`" + `]`)
)

// testNames returns the name of the test a line declares, or "".
func testName(p, line string) string {
	switch path.Ext(p) {
	case ".go":
		if m := goTestFunc.FindStringSubmatch(line); m != nil {
			return m[1]
		}
	case ".py":
		if m := pyTestFunc.FindStringSubmatch(line); m != nil {
			return m[1]
		}
	case ".js", ".jsx", ".ts", ".tsx", ".mjs", ".cjs", ".mts", ".cts":
		if m := jsTestCase.FindStringSubmatch(line); m != nil {
			return m[2]
		}
	}
	return ""
}

// testFlags returns f's FlagTestDeleted, FlagTestSkipped and
// FlagTestNarrowed flags.
func testFlags(f *File) []Flag {
	var out []Flag
	wasTest := f.Old != nil && (IsTestFile(f.Path) && f.OldPath == "" || f.OldPath != "" && IsTestFile(f.OldPath))
	switch {
	case f.New == nil && wasTest:
		what := "test file deleted"
		if !f.Binary && f.Removed > 0 {
			what += fmt.Sprintf(" (%d lines)", f.Removed)
		}
		return []Flag{{Kind: FlagTestDeleted, Reason: what}}
	case f.Status == Renamed && wasTest && !IsTestFile(f.Path):
		out = append(out, Flag{Kind: FlagTestDeleted, Reason: "test file renamed to a name its test runner does not pick up"})
	}
	if f.Binary || len(f.Hunks) == 0 {
		return out
	}
	// Lines this change removes, to tell a moved line from a new one.
	removed := map[string]int{}
	removedTests := map[string]bool{}
	var asserts map[string]bool
	oldPath := f.Path
	if f.OldPath != "" {
		oldPath = f.OldPath
	}
	removedLines(f, func(l string) {
		removed[strings.TrimSpace(l)]++
		if name := testName(oldPath, l); name != "" {
			removedTests[name] = true
		}
		if assertion.MatchString(l) {
			if asserts == nil {
				asserts = map[string]bool{}
			}
			if t, commented := uncommented(oldPath, l); !commented {
				asserts[t] = true
			}
		}
	})
	markers, hasMarkers := markersOf(f.Path)
	if markers.testsOnly && !IsTestFile(f.Path) {
		hasMarkers = false
	}
	skipped := map[string][]int{}
	focused := map[string][]int{}
	var commentedAsserts []int
	addedTests := 0 // tests the change declares anew: a test renamed is no test removed
	addedLines(f, func(l string, n int) {
		t, commented := uncommented(f.Path, l)
		if commented {
			if asserts[t] && t != "" {
				commentedAsserts = append(commentedAsserts, n)
			}
			return
		}
		if name := testName(f.Path, l); name != "" {
			if removedTests[name] {
				delete(removedTests, name)
			} else {
				addedTests++
			}
		}
		if !hasMarkers {
			return
		}
		if removed[t] > 0 {
			removed[t]-- // moved, not added
			return
		}
		for _, mk := range markers.skip {
			if mk.re.MatchString(l) {
				skipped[mk.label] = append(skipped[mk.label], n)
				break
			}
		}
		for _, mk := range markers.focus {
			if mk.re.MatchString(l) {
				focused[mk.label] = append(focused[mk.label], n)
				break
			}
		}
	})
	if len(removedTests) > addedTests && f.New != nil {
		names := make([]string, 0, len(removedTests))
		for n := range removedTests {
			names = append(names, n)
		}
		sort.Strings(names)
		var shown []string
		for i, n := range names {
			if i == namesInReason {
				shown = append(shown, fmt.Sprintf("… (%d in all)", len(names)))
				break
			}
			shown = append(shown, shownName(n))
		}
		out = append(out, Flag{Kind: FlagTestDeleted, Reason: counted(len(names), "test", "tests") + " removed: " + strings.Join(shown, ", ")})
	}
	if len(skipped) > 0 {
		reason, lines := markerReason(skipped)
		out = append(out, Flag{Kind: FlagTestSkipped, Reason: "tests skipped: " + reason, Lines: lines})
	}
	var narrowed []string
	var narrowedLines []int
	if len(focused) > 0 {
		reason, lines := markerReason(focused)
		narrowed = append(narrowed, reason+" (only the focused tests run)")
		narrowedLines = append(narrowedLines, lines...)
	}
	if len(commentedAsserts) > 0 {
		narrowed = append(narrowed, counted(len(commentedAsserts), "assertion", "assertions")+" commented out"+atLines(commentedAsserts))
		narrowedLines = append(narrowedLines, commentedAsserts...)
	}
	if len(narrowed) > 0 {
		sort.Ints(narrowedLines)
		out = append(out, Flag{Kind: FlagTestNarrowed, Reason: "tests narrowed: " + strings.Join(narrowed, "; "), Lines: narrowedLines})
	}
	return out
}

// markerReason is "t.Skip at line 12; xit at lines 3, 9" and every line
// number, sorted.
func markerReason(found map[string][]int) (string, []int) {
	labels := make([]string, 0, len(found))
	var all []int
	for l, ns := range found {
		labels = append(labels, l)
		all = append(all, ns...)
	}
	sort.Slice(labels, func(i, j int) bool { return found[labels[i]][0] < found[labels[j]][0] })
	var parts []string
	for _, l := range labels {
		parts = append(parts, l+atLines(found[l]))
	}
	sort.Ints(all)
	return strings.Join(parts, "; "), all
}

// counted is "1 test" or "3 tests".
func counted(n int, one, many string) string {
	if n == 1 {
		return fmt.Sprintf("%d %s", n, one)
	}
	return fmt.Sprintf("%d %s", n, many)
}
