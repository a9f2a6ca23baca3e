// Package semantic says what a change to one source file means: which
// functions, methods, types, classes and constants were added, removed,
// renamed, moved or changed (in their signature, with the parameters
// named, or in their body). Go is read with the standard library's
// go/parser; Python, JavaScript, TypeScript/TSX, Rust, Java, C and C++ with
// tree-sitter grammars compiled to WebAssembly and run under wazero (pure
// Go: every build has them). Any other file has no summary, and its reader
// falls back to line counts.
//
// Both sides come from the guest and are hostile: a side over MaxSize is
// not parsed, a parse has a deadline, tree-sitter's memory is capped and
// what it gives back is checked (a parser that fails fails its file only),
// names are cut to a line's length and the number of declarations is
// capped. Names are returned as written;
// whoever shows them renders them safely.
//
// It must not import anything in the module except internal/safetext.
package semantic

import (
	"context"
	"errors"
	"path"
	"slices"
	"strings"
	"time"

	"github.com/airlock-dev/airlock/internal/safetext"
)

// Limits on what is parsed, for hostile input.
const (
	// MaxSize is the largest side, in bytes, that is parsed.
	MaxSize = 1 << 20
	// MaxDecls is the most declarations read from one side.
	MaxDecls = 5000
	// maxName is the longest name kept, in runes.
	maxName = 120
	// parseTimeout bounds one side's parse, and parsePerMiB more for
	// each MiB of it: tree-sitter under wazero parses a 300 kB script
	// of calls in about 1.5 s (4 times what it took in-process).
	parseTimeout = 2 * time.Second
	parsePerMiB  = 8 * time.Second
	// maxDepth bounds how deep declarations nest (classes in namespaces
	// in modules ...) before the reader stops looking inside.
	maxDepth = 32
)

// Op is what happened to a declaration.
type Op string

const (
	Added   Op = "added"
	Removed Op = "removed"
	Renamed Op = "renamed"
	Changed Op = "changed"
	// Moved: the same declaration, unchanged, in another place of the file.
	Moved Op = "moved"
)

// Kind is what a declaration declares, in the words of its language.
type Kind string

const (
	Function  Kind = "function"
	Method    Kind = "method"
	Class     Kind = "class"
	Struct    Kind = "struct"
	Interface Kind = "interface"
	Trait     Kind = "trait"
	Enum      Kind = "enum"
	Type      Kind = "type"
	Constant  Kind = "constant"
	Variable  Kind = "variable"
	Field     Kind = "field"
	Macro     Kind = "macro"
	Module    Kind = "module"
	// TopLevel is the code of a file outside every declaration: a
	// script's statements, Python's `if __name__ == "__main__":`, a
	// JavaScript module's calls and exports, Go's directives.
	TopLevel Kind = "top-level code"
)

// Change is one declaration's change.
type Change struct {
	Op   Op   `json:"op"`
	Kind Kind `json:"kind"`
	// Name is the declaration's name, qualified by what holds it
	// ("Counter.add", "Parser::parse"); the new name for Renamed.
	Name string `json:"name"`
	// OldName is the name before, for Renamed.
	OldName string `json:"old_name,omitempty"`
	// Signature and Body say which part changed (Changed, and Renamed
	// when more than the name changed).
	Signature bool `json:"signature,omitempty"`
	Body      bool `json:"body,omitempty"`
	// NewParams and RemovedParams name the parameters added and removed
	// when the signature changed.
	NewParams     []string `json:"new_params,omitempty"`
	RemovedParams []string `json:"removed_params,omitempty"`
	// Line is where the declaration starts: in the new content, or in
	// the old one for Removed (1-based).
	Line int `json:"line,omitempty"`
}

// Summary is what one file's change means.
type Summary struct {
	// Language is the parser's language ("Go", "Python" ...), "" when the
	// file is not one that is parsed.
	Language string   `json:"language,omitempty"`
	Changes  []Change `json:"changes,omitempty"`
	// Errors names the sides ("old", "new") that did not parse cleanly:
	// their declarations are what the parser could recover.
	Errors []string `json:"errors,omitempty"`
	// Skipped says why a file in a known language was not read ("larger
	// than 1 MiB", "more than 5000 declarations", "took too long to
	// parse", "could not be parsed: ...").
	Skipped string `json:"skipped,omitempty"`
}

// Parsed reports whether the summary comes from a parser.
func (s *Summary) Parsed() bool { return s != nil && s.Language != "" && s.Skipped == "" }

// Language returns the language name of a path by its extension, and
// whether this build can parse it.
func Language(p string) (string, bool) {
	l := languageOf(p)
	if l == nil {
		return "", false
	}
	return l.name, l.read != nil
}

// language is how to read one language.
type language struct {
	name string
	exts []string
	// read lists the declarations of src and whether it parsed cleanly;
	// nil when this build has no parser for the language.
	read reader
	// prepare, when not nil, readies the parser (compiles a grammar's
	// module, the first time): outside the parse's deadline, which is
	// the hostile file's alone.
	prepare func() error
}

// reader lists the declarations of src and whether it parsed cleanly.
// Their tokens are read on demand until release, when not nil, is called.
type reader func(ctx context.Context, src []byte) (ds []decl, clean bool, release func(), err error)

var languages = []*language{
	{name: "Go", exts: []string{".go"}},
	{name: "Python", exts: []string{".py", ".pyi", ".pyw"}},
	{name: "JavaScript", exts: []string{".js", ".mjs", ".cjs", ".jsx"}},
	{name: "TypeScript", exts: []string{".ts", ".mts", ".cts"}},
	{name: "TSX", exts: []string{".tsx"}},
	{name: "Rust", exts: []string{".rs"}},
	{name: "Java", exts: []string{".java"}},
	{name: "C", exts: []string{".c", ".h"}},
	{name: "C++", exts: []string{".cc", ".cpp", ".cxx", ".c++", ".hh", ".hpp", ".hxx", ".h++", ".ipp", ".tpp"}},
}

// setReader gives the language called name its reader and what readies
// it (nil for nothing).
func setReader(name string, read reader, prepare func() error) {
	for _, l := range languages {
		if l.name == name {
			l.read, l.prepare = read, prepare
			return
		}
	}
	panic("semantic: no language " + name)
}

func languageOf(p string) *language {
	ext := strings.ToLower(path.Ext(p))
	for _, l := range languages {
		if slices.Contains(l.exts, ext) {
			return l
		}
	}
	return nil
}

// Summarize says what changed from old to new in the file at path (its
// new path; the language comes from its extension). A nil side is a
// missing one: every declaration of an added file is Added. It returns
// nil for a file in no language it knows.
func Summarize(p string, old, new []byte) *Summary {
	l := languageOf(p)
	if l == nil {
		return nil
	}
	s := &Summary{Language: l.name}
	if l.read == nil {
		s.Skipped = "no " + l.name + " parser in this build"
		return s
	}
	if len(old) > MaxSize || len(new) > MaxSize {
		s.Skipped = "larger than 1 MiB"
		return s
	}
	if l.prepare != nil {
		if err := l.prepare(); err != nil {
			s.Skipped = "could not be parsed: its parser did not start"
			return s
		}
	}
	var sides [2][]decl
	for i, src := range [][]byte{old, new} {
		if src == nil {
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), parseTimeout+parsePerMiB*time.Duration(len(src))/MaxSize)
		ds, clean, release, err := l.read(ctx, src)
		cancel()
		if release != nil {
			defer release()
		}
		switch {
		case err == errTooMany:
			s.Skipped = "more than 5000 declarations"
			return s
		case errors.Is(err, context.DeadlineExceeded), errors.Is(err, errParserFuel):
			s.Skipped = "took too long to parse"
			return s
		case errors.Is(err, errParserMemory):
			s.Skipped = "could not be parsed: the parser ran out of memory"
			return s
		case err != nil:
			// The parser trapped or gave back no tree (wazero's words
			// for it span lines: they are not the summary's).
			s.Skipped = "could not be parsed"
			return s
		}
		if !clean {
			s.Errors = append(s.Errors, [...]string{"old", "new"}[i])
		}
		sides[i] = ds
	}
	s.Changes = compare(sides[0], sides[1])
	return s
}

// Unread is the summary of the file at path left unread for the reason
// why ("took too long"): nil for a file in no language it knows.
func Unread(p, why string) *Summary {
	l := languageOf(p)
	if l == nil {
		return nil
	}
	return &Summary{Language: l.name, Skipped: why}
}

// topLevelDecl is the code outside every declaration, as one declaration.
func topLevelDecl(tokens []string) decl {
	return decl{
		kind: TopLevel, name: "top-level code",
		bodyText: strings.Join(tokens, "\x00"),
		lex:      func() ([]string, []string) { return nil, tokens },
	}
}

// decl is one declaration as read from one side.
type decl struct {
	kind Kind
	// name is the qualified name; simple is the declared name alone.
	name, simple string
	// sigText and bodyText are the declaration's source: the signature
	// (what comes before the body) and the body. Equal texts need no
	// tokens to compare.
	sigText, bodyText string
	// lex reads the tokens of the signature and the body, comments and
	// layout left out; tokens fills sig and body with them once, the
	// declaration's own name replaced by selfToken (so that a rename
	// compares equal).
	lex       func() (sig, body []string)
	lexed     bool
	sig, body []string
	params    []string
	line      int
}

// tokens reads d's tokens into sig and body, once.
func (d *decl) tokens() {
	if d.lexed {
		return
	}
	d.lexed = true
	if d.lex != nil {
		d.sig, d.body = d.lex()
	}
	replaceSelf(d.sig, d.simple)
	replaceSelf(d.body, d.simple)
}

// selfToken stands for a declaration's own name in its tokens.
const selfToken = "\x00self"

// cleanName makes a name from the source fit one line.
func cleanName(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	return safetext.Cut(s, maxName)
}

// errTooMany is returned by a reader that found more than MaxDecls.
var errTooMany = errorString("more than MaxDecls declarations")

type errorString string

func (e errorString) Error() string { return string(e) }

// collector gathers one side's declarations.
type collector struct {
	decls []decl
	full  bool
}

func (c *collector) add(d decl) {
	if len(c.decls) >= MaxDecls {
		c.full = true
		return
	}
	d.name = cleanName(d.name)
	d.simple = cleanName(d.simple)
	for i, p := range d.params {
		d.params[i] = cleanName(p)
	}
	c.decls = append(c.decls, d)
}

func (c *collector) result(clean bool) ([]decl, bool, error) {
	if c.full {
		return nil, false, errTooMany
	}
	return c.decls, clean, nil
}

// replaceSelf replaces the tokens equal to name by selfToken, in place.
func replaceSelf(toks []string, name string) []string {
	for i, t := range toks {
		if t == name {
			toks[i] = selfToken
		}
	}
	return toks
}
