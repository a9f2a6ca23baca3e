package review

import (
	"context"
	"fmt"
	"path"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/airlock-dev/airlock/internal/safetext"
	"github.com/airlock-dev/airlock/review/semantic"
)

// SummarizeBudget is how long Summarize reads files: each file is bounded
// on its own (review/semantic), but a hostile guest could send thousands
// made to be slow. A file not read by then says so, and its reader falls
// back to the line counts.
const SummarizeBudget = 30 * time.Second

// Summarize reads what each text file's change means with its language's
// parser (review/semantic) into File.Semantic: functions, methods, types
// and constants added, removed, renamed, moved or changed. A file in no
// known language, a binary, a link or a directory keeps none, and its
// reader falls back to the line counts. Calling it again does nothing more.
func (cs *Changeset) Summarize(ctx context.Context) error {
	return cs.summarize(ctx, SummarizeBudget)
}

func (cs *Changeset) summarize(ctx context.Context, budget time.Duration) error {
	deadline := time.Now().Add(budget)
	late := fmt.Sprintf("reading the run's changes took over %s", budget)
	// Files are read in parallel, one worker a CPU: a parse is cgo or
	// pure computation, nothing waits on I/O.
	next := make(chan *File)
	var wg sync.WaitGroup
	for range runtime.GOMAXPROCS(0) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for f := range next {
				if time.Now().After(deadline) {
					f.Semantic = semantic.Unread(f.Path, late)
					continue
				}
				var old, new []byte
				if f.Old != nil {
					old = orEmpty(f.oldData)
				}
				if f.New != nil {
					new = orEmpty(f.newData)
				}
				f.Semantic = semantic.Summarize(f.Path, old, new)
			}
		}()
	}
	defer wg.Wait()
	defer close(next)
	for _, f := range cs.Files {
		if err := ctx.Err(); err != nil {
			return err
		}
		if f.Semantic != nil || f.Binary || f.IsDir() || f.IsSymlink() {
			continue
		}
		next <- f
	}
	return nil
}

// orEmpty keeps an empty side apart from a missing one.
func orEmpty(b []byte) []byte {
	if b == nil {
		return []byte{}
	}
	return b
}

// maxOverviewPhrases is how many phrases the run's overview holds before
// it says how many more there are; maxOverviewNames how many files one
// phrase names before it counts the rest.
const (
	maxOverviewPhrases = 12
	maxOverviewNames   = 5
)

// Overview says what the run changed in meaning, in one line read before
// the files: each code file's changes ("count_words: new parameter
// stop_words; added STOP_WORDS"), then the tests ("tests: added
// test_stopwords.py"), the code files whose declarations did not change
// ("imports, comments or layout only: util.go"), and the other files
// ("also: README.md", or "changed README.md" when they are all there is).
// A phrase names at most a few files and counts the rest, so the line
// stays short on a change to thousands of files. It is "" for an empty
// changeset. Summarize must have run for the code files to be read;
// names and paths are rendered safely.
func (cs *Changeset) Overview() string {
	var code, quiet, other []string
	var tests []*File
	bases := map[string]int{}
	for _, f := range cs.Files {
		bases[path.Base(f.Path)]++
	}
	name := func(f *File) string {
		p := f.Path
		if bases[path.Base(p)] == 1 {
			p = path.Base(p)
		}
		return safetext.Name(p)
	}
	for _, f := range cs.Files {
		switch {
		case IsTestFile(f.Path):
			tests = append(tests, f)
		case f.Semantic.Parsed() && (len(f.Semantic.Changes) > 0 || f.Status == Added || f.Status == Deleted || brokenNew(f.Semantic)):
			code = append(code, filePhrases(f, name(f))...)
		case f.Semantic.Parsed() && f.Status == Modified:
			quiet = append(quiet, name(f))
		default:
			other = append(other, name(f))
		}
	}
	var parts []string
	parts = append(parts, sameOnce(code)...)
	if len(tests) > 0 {
		parts = append(parts, "tests: "+testsPhrase(tests, name))
	}
	if len(quiet) > 0 {
		parts = append(parts, "imports, comments or layout only: "+someOf(quiet, "file", "files"))
	}
	switch {
	case len(other) > 0 && len(parts) == 0:
		parts = append(parts, "changed "+someOf(other, "file", "files"))
	case len(other) > 0:
		parts = append(parts, "also: "+someOf(other, "file", "files"))
	}
	if len(parts) > maxOverviewPhrases {
		more := len(parts) - (maxOverviewPhrases - 1)
		parts = append(parts[:maxOverviewPhrases-1], fmt.Sprintf("and %d more", more))
	}
	return strings.Join(parts, "; ")
}

// someOf names up to maxOverviewNames of names ("a.go, b.go"), else the
// first of them and how many more ("a.go, b.go, c.go, d.go and 96 more
// files").
func someOf(names []string, one, many string) string {
	if len(names) <= maxOverviewNames {
		return strings.Join(names, ", ")
	}
	shown := maxOverviewNames - 1
	return strings.Join(names[:shown], ", ") + " and " + counted(len(names)-shown, "more "+one, "more "+many)
}

// testsPhrase says what happened to the test files: each one when they
// are few ("added test_stopwords.py, changed cli_test.go"), else their
// number by what happened ("182 changed, 2 added, 1 removed").
func testsPhrase(tests []*File, name func(*File) string) string {
	if len(tests) <= maxOverviewNames {
		var out []string
		for _, f := range tests {
			out = append(out, statusWord(f)+" "+name(f))
		}
		return strings.Join(out, ", ")
	}
	count := map[string]int{}
	for _, f := range tests {
		count[statusWord(f)]++
	}
	var out []string
	for _, w := range []string{"changed", "added", "removed", "renamed"} {
		if count[w] > 0 {
			out = append(out, fmt.Sprintf("%d %s", count[w], w))
		}
	}
	return strings.Join(out, ", ")
}

// sameOnce keeps the first of phrases said alike by several files ("a:
// value changed"), counting them: "a: value changed (in 12 files)".
func sameOnce(phrases []string) []string {
	count := map[string]int{}
	for _, p := range phrases {
		count[p]++
	}
	var out []string
	for _, p := range phrases {
		switch n := count[p]; {
		case n == 0:
			continue
		case n > 1:
			out = append(out, fmt.Sprintf("%s (in %d files)", p, n))
		default:
			out = append(out, p)
		}
		count[p] = 0
	}
	return out
}

// filePhrases are one code file's phrases in the overview: its
// declarations' changes, or for a whole file added or deleted, the file
// with what it declares.
func filePhrases(f *File, name string) []string {
	out := changePhrases(f, name)
	if brokenNew(f.Semantic) {
		// What it declares may be missing: never "layout only".
		out = append(out, name+": does not parse as "+f.Semantic.Language)
	}
	return out
}

// brokenNew reports whether the new side of a summarized file did not
// parse cleanly.
func brokenNew(s *semantic.Summary) bool { return s != nil && slices.Contains(s.Errors, "new") }

// changePhrases are filePhrases less the parse error.
func changePhrases(f *File, name string) []string {
	s := f.Semantic
	if f.Status == Added || f.Status == Deleted {
		var decls []string
		for _, c := range s.Changes {
			decls = append(decls, safetext.Name(c.Name))
		}
		phrase := statusWord(f) + " " + name
		switch {
		case len(decls) == 0:
		case len(decls) <= 3:
			phrase += " (" + strings.Join(decls, ", ") + ")"
		default:
			phrase += fmt.Sprintf(" (%d declarations)", len(decls))
		}
		return []string{phrase}
	}
	var out []string
	moved := 0
	for _, c := range s.Changes {
		switch {
		case c.Op == semantic.Moved:
			moved++
		case c.Kind == semantic.TopLevel:
			// Code with no name of its own: the file's name says where.
			out = append(out, name+": "+c.Short())
		default:
			out = append(out, c.Short())
		}
	}
	if moved > 0 && len(out) == 0 {
		out = append(out, name+": "+counted(moved, "declaration", "declarations")+" moved")
	}
	if f.Status == Renamed {
		out = append([]string{"moved " + safetext.Name(path.Base(f.OldPath)) + " to " + name}, out...)
	}
	return out
}

// statusWord is how the overview says a file's status.
func statusWord(f *File) string {
	switch f.Status {
	case Added:
		return "added"
	case Deleted:
		return "removed"
	case Renamed:
		return "renamed"
	}
	return "changed"
}
