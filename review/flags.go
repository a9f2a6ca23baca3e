package review

import (
	"bytes"
	"fmt"
	"path"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"github.com/airlock-dev/airlock/sync/manifest"
)

// What deserves a second look, beyond the files that run on the host,
// control characters and modes (changeset.go): computed from the change
// itself when the changeset is built, never by a model. Everything here
// reads hostile content, so every pass is bounded (maxScanLines,
// maxScanLineBytes, maxManifestBytes) and no parser may panic.

const (
	// FlagDependency: a dependency manifest or lockfile changed; the
	// flag lists the dependency names added, removed and given another
	// version, when they can be read.
	FlagDependency FlagKind = "dependencies"
	// FlagCI: a CI configuration changed that is not already flagged
	// FlagHostExec (which covers the CI systems whose files run with the
	// repository's secrets on every push).
	FlagCI FlagKind = "ci"
	// FlagTestDeleted: a test file deleted (or renamed so that it no
	// longer runs), or test functions removed from one.
	FlagTestDeleted FlagKind = "test-deleted"
	// FlagTestSkipped: added lines skip tests (t.Skip, @pytest.mark.skip,
	// xit, it.skip, @Disabled, #[ignore]…).
	FlagTestSkipped FlagKind = "test-skipped"
	// FlagTestNarrowed: added lines narrow what tests run or check:
	// focused tests (.only, fit, fdescribe) and assertions commented out.
	FlagTestNarrowed FlagKind = "test-narrowed"
	// FlagCredential: added lines hold what looks like a credential: a
	// private key block, a well-known token shape, a high-entropy string.
	FlagCredential FlagKind = "credential"
	// FlagLargeDeletion: a deleted file of at least LargeDeletedFile
	// lines, or a hunk removing at least LargeDeletedHunk lines (and more
	// than twice what it adds).
	FlagLargeDeletion FlagKind = "large-deletion"
	// FlagGenerated: the file says it is written by a tool (Code generated
	// … DO NOT EDIT, *.pb.go, minified): reviewers skip such diffs, which
	// is where a hand edit hides. Lockfiles carry FlagDependency instead.
	FlagGenerated FlagKind = "generated"
	// FlagBinary: the new content is not shown line by line (binary, or
	// larger than Options.MaxTextSize).
	FlagBinary FlagKind = "binary"
)

// Thresholds of FlagLargeDeletion.
const (
	// LargeDeletedFile is the number of lines from which a deleted text
	// file is a large deletion: small enough to catch a module or a test
	// suite, large enough that removing a stale helper is not one.
	LargeDeletedFile = 100
	// LargeDeletedHunk is the number of lines from which one hunk that
	// removes more than twice what it adds is a large deletion (a hunk
	// that replaces most of what it removes is a rewrite, which the diff
	// shows whole).
	LargeDeletedHunk = 200
)

// Bounds on the work spent on one file.
const (
	// maxScanLines is how many added (and removed) lines of a file are
	// scanned for test markers and credentials.
	maxScanLines = 20000
	// maxScanLineBytes is how much of one line is scanned.
	maxScanLineBytes = 4096
	// maxManifestBytes is the largest side of a dependency manifest or
	// lockfile that is parsed for names; a larger one is flagged without.
	maxManifestBytes = 4 << 20
	// maxNames is how many dependency names one flag lists in each of
	// Added, Removed and Changed.
	maxNames = 500
	// maxLinesNamed is how many line numbers a reason names.
	maxLinesNamed = 5
)

// secondLook returns the flags of f computed from its change (see the
// kinds above), one per kind. It runs once, when the changeset is built,
// after the hunks; its flags come after FlagHostExec and FlagMode and
// before FlagControl.
func secondLook(f *File) []Flag {
	var out []Flag
	if !f.IsDir() || f.TypeChange() != "" {
		if fl, ok := dependencyFlag(f); ok {
			out = append(out, fl)
		}
		if fl, ok := ciFlag(f); ok {
			out = append(out, fl)
		}
		tests := testFlags(f)
		out = append(out, tests...)
		if fl, ok := credentialFlag(f); ok {
			out = append(out, fl)
		}
		if fl, ok := confusableFlag(f); ok {
			out = append(out, fl)
		}
		// A deleted test file's flag says its size already.
		if fl, ok := largeDeletionFlag(f); ok && (f.New != nil || len(tests) == 0) {
			out = append(out, fl)
		}
		if fl, ok := generatedFlag(f); ok {
			out = append(out, fl)
		}
		if fl, ok := binaryFlag(f); ok {
			out = append(out, fl)
		}
	}
	return mergeKinds(out)
}

// mergeKinds makes flags one per kind, as HasFlag and FlagReason read
// them: the reasons of a kind found twice joined by "; ".
func mergeKinds(flags []Flag) []Flag {
	var out []Flag
	at := map[FlagKind]int{}
	for _, fl := range flags {
		i, seen := at[fl.Kind]
		if !seen {
			at[fl.Kind] = len(out)
			out = append(out, fl)
			continue
		}
		m := &out[i]
		m.Reason += "; " + fl.Reason
		m.Added = append(m.Added, fl.Added...)
		m.Removed = append(m.Removed, fl.Removed...)
		m.Changed = append(m.Changed, fl.Changed...)
		m.Lines = append(m.Lines, fl.Lines...)
	}
	return out
}

// addedLines calls fn with each added line of f's hunks (at most
// maxScanLines, each cut to maxScanLineBytes) and its number in the new
// content.
func addedLines(f *File, fn func(line string, n int)) {
	scanned := 0
	for _, h := range f.Hunks {
		n := h.NewStart
		if h.NewLines == 0 {
			n++
		}
		for _, l := range h.Lines {
			switch l.Kind {
			case Insert:
				if scanned++; scanned > maxScanLines {
					return
				}
				fn(clip(l.Text), n)
				n++
			case Context:
				n++
			}
		}
	}
}

// removedLines calls fn with each removed line of f's hunks (bounded as
// addedLines).
func removedLines(f *File, fn func(line string)) {
	scanned := 0
	for _, h := range f.Hunks {
		for _, l := range h.Lines {
			if l.Kind != Delete {
				continue
			}
			if scanned++; scanned > maxScanLines {
				return
			}
			fn(clip(l.Text))
		}
	}
}

func clip(s string) string {
	if len(s) > maxScanLineBytes {
		return s[:maxScanLineBytes]
	}
	return s
}

// atLines is " at line 12", " at lines 12, 40" or " at lines 12, 40, … (7
// in all)".
func atLines(lines []int) string {
	switch len(lines) {
	case 0:
		return ""
	case 1:
		return fmt.Sprintf(" at line %d", lines[0])
	}
	var b strings.Builder
	b.WriteString(" at lines ")
	for i, n := range lines {
		if i == maxLinesNamed {
			fmt.Fprintf(&b, ", … (%d in all)", len(lines))
			break
		}
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(strconv.Itoa(n))
	}
	return b.String()
}

// shownName makes a name read from guest content fit a reason: one line
// of at most 80 characters, quoted with Go escapes unless it only holds
// the characters package names are made of.
func shownName(s string) string {
	const maxLen = 80
	if len(s) > maxLen {
		s = s[:maxLen] + "…"
	}
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("@/._-+~:[]…", r)) {
			return strconv.QuoteToASCII(s)
		}
	}
	if s == "" {
		return `""`
	}
	return s
}

// isVendored reports whether p lies in a folder of other people's code
// (vendor/, node_modules/…) or of test fixtures (testdata/): its
// manifests are not the project's.
func isVendored(p string) bool {
	elems := strings.Split(p, "/")
	for _, e := range elems[:len(elems)-1] {
		switch e {
		case "vendor", "node_modules", "bower_components", "testdata", "third_party", ".yarn":
			return true
		}
	}
	return false
}

// ciRule is a CI configuration that the host-exec list does not name.
type ciRule struct {
	pattern string
	reason  string
}

// CIPrefix starts the reason of every FlagCI flag.
const CIPrefix = "CI configuration: "

// ciRules are CI and repository-policy files; a path that also matches
// the host-exec list carries FlagHostExec only.
var ciRules = []ciRule{
	{".gitea/workflows", "CI runs it with your repository's secrets (Gitea Actions)"},
	{".forgejo/workflows", "CI runs it with your repository's secrets (Forgejo Actions)"},
	{".gitlab-ci.yaml", "CI runs it with your repository's secrets (GitLab)"},
	{".gitlab/ci", "CI runs it with your repository's secrets (GitLab includes)"},
	{"azure-pipelines.yaml", "CI runs it with your repository's secrets (Azure Pipelines)"},
	{".azure-pipelines", "CI runs it with your repository's secrets (Azure Pipelines)"},
	{".azuredevops", "CI runs it with your repository's secrets (Azure DevOps)"},
	{"Jenkinsfile.*", "CI runs it with your repository's secrets (Jenkins)"},
	{"*.jenkinsfile", "CI runs it with your repository's secrets (Jenkins)"},
	{".drone.yml", "CI runs it with your repository's secrets (Drone)"},
	{".drone.yaml", "CI runs it with your repository's secrets (Drone)"},
	{".woodpecker.yml", "CI runs it with your repository's secrets (Woodpecker)"},
	{".woodpecker.yaml", "CI runs it with your repository's secrets (Woodpecker)"},
	{".woodpecker", "CI runs it with your repository's secrets (Woodpecker)"},
	{"bitbucket-pipelines.yml", "CI runs it with your repository's secrets (Bitbucket Pipelines)"},
	{"appveyor.yml", "CI runs it with your repository's secrets (AppVeyor)"},
	{".appveyor.yml", "CI runs it with your repository's secrets (AppVeyor)"},
	{".cirrus.yml", "CI runs it with your repository's secrets (Cirrus CI)"},
	{".cirrus.star", "CI runs it with your repository's secrets (Cirrus CI)"},
	{"cloudbuild.yaml", "CI runs it with your repository's secrets (Cloud Build)"},
	{"cloudbuild.yml", "CI runs it with your repository's secrets (Cloud Build)"},
	{"buildspec.yml", "CI runs it with your repository's secrets (AWS CodeBuild)"},
	{"buildspec.yaml", "CI runs it with your repository's secrets (AWS CodeBuild)"},
	{".semaphore", "CI runs it with your repository's secrets (Semaphore)"},
	{".tekton", "CI runs it with your repository's secrets (Tekton)"},
	{".teamcity", "CI runs it with your repository's secrets (TeamCity)"},
	{"bitrise.yml", "CI runs it with your repository's secrets (Bitrise)"},
	{"codemagic.yaml", "CI runs it with your repository's secrets (Codemagic)"},
	{".github/dependabot.yml", "changes which dependency updates Dependabot proposes"},
	{".github/dependabot.yaml", "changes which dependency updates Dependabot proposes"},
	{"renovate.json", "changes which dependency updates Renovate proposes and merges"},
	{"renovate.json5", "changes which dependency updates Renovate proposes and merges"},
	{".renovaterc", "changes which dependency updates Renovate proposes and merges"},
	{".renovaterc.json", "changes which dependency updates Renovate proposes and merges"},
	{".github/renovate.json", "changes which dependency updates Renovate proposes and merges"},
	{".github/renovate.json5", "changes which dependency updates Renovate proposes and merges"},
	{"CODEOWNERS", "changes who must approve changes (CODEOWNERS)"},
	{".mergify.yml", "changes what Mergify merges on its own"},
	{".github/mergify.yml", "changes what Mergify merges on its own"},
	{"netlify.toml", "the build commands Netlify runs with your site's secrets"},
	{"vercel.json", "the build commands Vercel runs with your project's secrets"},
}

// ciFlag flags a change to a CI configuration that FlagHostExec does not
// already cover.
func ciFlag(f *File) (Flag, bool) {
	if f.HasFlag(FlagHostExec) {
		return Flag{}, false
	}
	for _, p := range []string{f.Path, f.OldPath} {
		if p == "" {
			continue
		}
		if reason, ok := firstMatch(ciCompiled, strings.Split(p, "/")); ok {
			return Flag{Kind: FlagCI, Reason: CIPrefix + reason}, true
		}
	}
	return Flag{}, false
}

// largeDeletionFlag flags a deleted text file of LargeDeletedFile lines
// or more, and hunks that remove LargeDeletedHunk lines or more and more
// than twice what they add.
func largeDeletionFlag(f *File) (Flag, bool) {
	if f.Binary || f.Old == nil {
		return Flag{}, false
	}
	if f.New == nil || f.New.Type != f.Old.Type {
		if f.Removed >= LargeDeletedFile {
			return Flag{Kind: FlagLargeDeletion, Reason: fmt.Sprintf("large deletion: deletes a file of %d lines", f.Removed)}, true
		}
		return Flag{}, false
	}
	var lines []int
	removed := 0
	for _, h := range f.Hunks {
		if h.Removed >= LargeDeletedHunk && h.Removed > 2*h.Added {
			lines = append(lines, firstRemoved(h))
			removed += h.Removed
		}
	}
	if len(lines) == 0 {
		return Flag{}, false
	}
	return Flag{Kind: FlagLargeDeletion, Lines: lines,
		Reason: fmt.Sprintf("large deletion: removes %d lines%s of the old file", removed, atLines(lines))}, true
}

// firstRemoved is the old line number of h's first removed line.
func firstRemoved(h Hunk) int {
	n := h.oldOffset() + 1
	for _, l := range h.Lines {
		if l.Kind == Delete {
			return n
		}
		if l.Kind == Context {
			n++
		}
	}
	return n
}

// generatedMarker is Go's convention for generated code
// (https://go.dev/s/generatedcode), which other generators follow.
var generatedMarker = regexp.MustCompile(`(?m)^(//|#|--|/\*) Code generated .* DO NOT EDIT\.`)

// lockfileNames are files package managers write whose diffs nobody
// reads line by line.
var lockfileNames = map[string]bool{
	"go.sum": true, "go.work.sum": true, "package-lock.json": true, "yarn.lock": true, "pnpm-lock.yaml": true,
	"Cargo.lock": true, "poetry.lock": true, "composer.lock": true, "Gemfile.lock": true,
	"npm-shrinkwrap.json": true, "uv.lock": true, "bun.lock": true, "bun.lockb": true, "Pipfile.lock": true,
	"pdm.lock": true, "mix.lock": true, "pubspec.lock": true, "Podfile.lock": true, "Package.resolved": true,
	"gradle.lockfile": true, "packages.lock.json": true, "deno.lock": true, "flake.lock": true,
}

// Generated reports whether f looks written by a tool, with the reason
// in a few words ("a lock or checksum file", "minified"…): a lockfile, a
// protocol buffer's code, a minified script or style sheet, or a file
// that says "Code generated … DO NOT EDIT" in its first 4 KiB (its new
// content, or its old one when deleted).
func Generated(f *File) (string, bool) {
	base := path.Base(f.Path)
	switch {
	case lockfileNames[base]:
		return "a lock or checksum file", true
	case strings.HasSuffix(base, ".pb.go"), strings.HasSuffix(base, "_pb2.py"), strings.HasSuffix(base, "_pb2_grpc.py"),
		strings.HasSuffix(base, ".pb.cc"), strings.HasSuffix(base, ".pb.h"), strings.HasSuffix(base, "_pb.js"), strings.HasSuffix(base, "_pb.d.ts"):
		return "generated from a protocol buffer definition", true
	case strings.HasSuffix(base, ".min.js"), strings.HasSuffix(base, ".min.css"), strings.HasSuffix(base, ".min.mjs"):
		return "minified", true
	}
	head := f.NewContent()
	if head == nil {
		head = f.OldContent()
	}
	head = head[:min(len(head), 4096)]
	if bytes.Contains(head, []byte("DO NOT EDIT")) && generatedMarker.Match(head) {
		return "it says “Code generated … DO NOT EDIT”", true
	}
	return "", false
}

// generatedFlag flags a generated file that has new content (a deleted
// one is a deletion); lockfiles carry FlagDependency instead.
func generatedFlag(f *File) (Flag, bool) {
	if f.New == nil || lockfileNames[path.Base(f.Path)] {
		return Flag{}, false
	}
	why, ok := Generated(f)
	if !ok {
		return Flag{}, false
	}
	return Flag{Kind: FlagGenerated, Reason: "generated (" + why + "): easy to skip in review; check it was regenerated, not edited by hand"}, true
}

// binaryFlag flags new content that is not shown line by line.
func binaryFlag(f *File) (Flag, bool) {
	if !f.Binary || f.New == nil || f.New.Type != manifest.File {
		return Flag{}, false
	}
	if f.TooLarge {
		return Flag{Kind: FlagBinary, Reason: fmt.Sprintf("too large to show line by line (%d bytes): not reviewed here", f.New.Size)}, true
	}
	return Flag{Kind: FlagBinary, Reason: fmt.Sprintf("binary (%d bytes): its content is not shown", f.New.Size)}, true
}

// flagOrder is the order kinds are counted in an overview: what is
// riskiest first.
var flagOrder = []FlagKind{
	FlagHostExec, FlagCredential, FlagConfusable, FlagDependency, FlagCI, FlagTestDeleted, FlagTestSkipped, FlagTestNarrowed,
	FlagLargeDeletion, FlagControl, FlagMode, FlagGenerated, FlagBinary,
}

// FlagCount is how often one kind of flag occurs in a changeset.
type FlagCount struct {
	Kind FlagKind `json:"kind"`
	// Files carrying the flag.
	Files int `json:"files"`
	// Count is what Text counts: the files, or for skipped and narrowed
	// tests and credentials, the lines found.
	Count int `json:"count"`
	// Text says it for a person: "1 dependency change (added:
	// left-pad)", "2 tests skipped".
	Text string `json:"text"`
}

// SecondLook is the overview of a changeset's flags.
type SecondLook struct {
	// Files is how many files carry at least one flag.
	Files int         `json:"files"`
	Kinds []FlagCount `json:"kinds,omitempty"`
	// Added and Removed are the dependency names added to and removed
	// from the manifests (the lockfiles' when no manifest lists any).
	Added   []string `json:"dependencies_added,omitempty"`
	Removed []string `json:"dependencies_removed,omitempty"`
}

// flagNouns say a count of each kind: singular and plural.
var flagNouns = map[FlagKind][2]string{
	FlagHostExec:      {"file that runs on your machine", "files that run on your machine"},
	FlagCredential:    {"possible credential", "possible credentials"},
	FlagConfusable:    {"name mixing lookalike scripts", "names mixing lookalike scripts"},
	FlagDependency:    {"dependency change", "dependency changes"},
	FlagCI:            {"CI configuration change", "CI configuration changes"},
	FlagTestDeleted:   {"test deletion", "test deletions"},
	FlagTestSkipped:   {"test skipped", "tests skipped"},
	FlagTestNarrowed:  {"test narrowed", "tests narrowed"},
	FlagLargeDeletion: {"large deletion", "large deletions"},
	FlagControl:       {"file with control characters", "files with control characters"},
	FlagMode:          {"mode git cannot show", "modes git cannot show"},
	FlagGenerated:     {"generated file", "generated files"},
	FlagBinary:        {"binary file", "binary files"},
}

// countsLines are the kinds whose overview counts the lines found, not
// the files.
var countsLines = map[FlagKind]bool{FlagCredential: true, FlagConfusable: true, FlagTestSkipped: true, FlagTestNarrowed: true}

// namesInOverview is how many dependency names an overview shows of each
// list.
const namesInOverview = 5

// SecondLook counts the flags of cs by kind.
func (cs *Changeset) SecondLook() SecondLook {
	var s SecondLook
	byKind := map[FlagKind]*FlagCount{}
	manifestNames := [2]map[string]bool{{}, {}}
	lockNames := [2]map[string]bool{{}, {}}
	for _, f := range cs.Files {
		if len(f.Flags) == 0 {
			continue
		}
		s.Files++
		seen := map[FlagKind]bool{}
		for _, fl := range f.Flags {
			c := byKind[fl.Kind]
			if c == nil {
				c = &FlagCount{Kind: fl.Kind}
				byKind[fl.Kind] = c
			}
			if !seen[fl.Kind] {
				seen[fl.Kind] = true
				c.Files++
				if !countsLines[fl.Kind] {
					c.Count++
				}
			}
			if countsLines[fl.Kind] {
				c.Count += max(len(fl.Lines), 1)
			}
			if fl.Kind == FlagDependency {
				names := manifestNames
				if k, _ := depManifestOf(f.Path); k.lock {
					names = lockNames
				}
				for _, n := range fl.Added {
					names[0][n] = true
				}
				for _, n := range fl.Removed {
					names[1][n] = true
				}
			}
		}
	}
	names := manifestNames
	if len(names[0])+len(names[1]) == 0 {
		names = lockNames
	}
	s.Added, s.Removed = sortedNames(names[0]), sortedNames(names[1])
	kinds := append([]FlagKind(nil), flagOrder...)
	for k := range byKind {
		if _, known := flagNouns[k]; !known {
			kinds = append(kinds, k)
		}
	}
	for _, k := range kinds {
		c := byKind[k]
		if c == nil {
			continue
		}
		nouns, ok := flagNouns[k]
		if !ok {
			nouns = [2]string{string(k), string(k)}
		}
		c.Text = counted(c.Count, nouns[0], nouns[1])
		if k == FlagDependency {
			var parts []string
			if len(s.Added) > 0 {
				parts = append(parts, "added: "+overviewNames(s.Added))
			}
			if len(s.Removed) > 0 {
				parts = append(parts, "removed: "+overviewNames(s.Removed))
			}
			if len(parts) > 0 {
				c.Text += " (" + strings.Join(parts, "; ") + ")"
			}
		}
		s.Kinds = append(s.Kinds, *c)
	}
	return s
}

func sortedNames(set map[string]bool) []string {
	out := make([]string, 0, len(set))
	for n := range set {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// overviewNames is the first namesInOverview names shown, then "… (n in
// all)".
func overviewNames(names []string) string {
	shown := make([]string, 0, namesInOverview+1)
	for i, n := range names {
		if i == namesInOverview {
			shown = append(shown, fmt.Sprintf("… (%d in all)", len(names)))
			break
		}
		shown = append(shown, DependencyName(n))
	}
	return strings.Join(shown, ", ")
}

// String is the overview in one line: "4 files deserve a second look: 1
// dependency change (added: left-pad), 1 test skipped", or "" when no
// file is flagged.
func (s SecondLook) String() string {
	if s.Files == 0 {
		return ""
	}
	parts := make([]string, len(s.Kinds))
	for i, k := range s.Kinds {
		parts[i] = k.Text
	}
	verb := "files deserve"
	if s.Files == 1 {
		verb = "file deserves"
	}
	return fmt.Sprintf("%d %s a second look: %s", s.Files, verb, strings.Join(parts, ", "))
}
