package semantic

import (
	"fmt"
	"strings"

	"github.com/airlock-dev/airlock/internal/safetext"
)

// String says the change in words, with what the declaration is: "added
// function parse_args", "function count_words: new parameter stop_words,
// body changed", "renamed method Counter.add to Counter.push". Names are
// rendered safely (controls made visible).
func (c Change) String() string { return c.phrase(true) }

// Short says the change without the kind of declaration, for an overview:
// "added parse_args", "count_words: new parameter stop_words".
func (c Change) Short() string { return c.phrase(false) }

func (c Change) phrase(withKind bool) string {
	if c.Kind == TopLevel {
		// Code, not a declaration: it has no name of its own.
		if c.Op == Changed {
			return string(TopLevel) + " changed"
		}
		return string(c.Op) + " " + string(TopLevel)
	}
	name := safetext.Name(c.Name)
	what := name
	if withKind {
		what = string(c.Kind) + " " + name
	}
	switch c.Op {
	case Added, Removed, Moved:
		return string(c.Op) + " " + what
	case Renamed:
		s := "renamed " + safetext.Name(c.OldName) + " to " + name
		if withKind {
			s = "renamed " + string(c.Kind) + " " + safetext.Name(c.OldName) + " to " + name
		}
		if parts := c.parts(); parts != "" {
			s += " (" + parts + ")"
		}
		return s
	}
	return what + ": " + c.parts()
}

// parts says what changed besides the name: the parameters, the rest of
// the signature, the body.
func (c Change) parts() string {
	var out []string
	if len(c.NewParams) > 0 {
		out = append(out, plural(len(c.NewParams), "new parameter", "new parameters")+" "+names(c.NewParams))
	}
	if len(c.RemovedParams) > 0 {
		out = append(out, plural(len(c.RemovedParams), "parameter", "parameters")+" "+names(c.RemovedParams)+" removed")
	}
	if c.Signature && len(out) == 0 {
		out = append(out, "signature changed")
	}
	if c.Body {
		out = append(out, bodyWord(c.Kind)+" changed")
	}
	return strings.Join(out, ", ")
}

// bodyWord is what the part after the signature is called for a kind.
func bodyWord(k Kind) string {
	switch k {
	case Function, Method, Class:
		// A class's members are declarations of their own: its body
		// is the code outside them (a static block, a statement).
		return "body"
	case Struct:
		return "fields"
	case Interface, Trait:
		return "members"
	case Enum:
		return "values"
	case Constant, Variable, Field:
		return "value"
	}
	return "definition"
}

func names(list []string) string {
	shown := make([]string, len(list))
	for i, n := range list {
		shown[i] = safetext.Name(n)
	}
	return strings.Join(shown, ", ")
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// Lines says a summary in lines, one a change, at most max (the last then
// says how many more there are). A summary without changes says why.
func (s *Summary) Lines(max int) []string {
	if s == nil {
		return nil
	}
	var out []string
	if s.Skipped != "" {
		return []string{"not read as " + s.Language + ": " + s.Skipped}
	}
	for i, c := range s.Changes {
		if max > 0 && i == max-1 && len(s.Changes) > max {
			out = append(out, fmt.Sprintf("and %d more", len(s.Changes)-i))
			break
		}
		out = append(out, c.String())
	}
	if len(out) == 0 {
		out = append(out, "no declaration changed (imports, comments or layout only)")
	}
	if len(s.Errors) > 0 {
		which := "the " + strings.Join(s.Errors, " and ") + " " + plural(len(s.Errors), "version does", "versions do")
		out = append(out, which+" not parse cleanly as "+s.Language+": what it declares may be missing")
	}
	return out
}
