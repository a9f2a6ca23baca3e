package manifest

import (
	"bytes"
	"strconv"
	"strings"
)

// This file implements gitignore matching as git does it (dir.c and
// wildmatch.c), so that a snapshot excludes exactly what `git status
// --ignored` calls ignored. It is written here rather than imported: the
// one served library, go-git's plumbing/format/gitignore, disagrees with git
// on re-included directories ("*.log" then "!important/"), backtracking
// "a/**/b/c", "abc/**" with "!abc/keep" and "[!a]" classes (see
// TestGitignoreAgainstGit, which runs the real git over the same cases).

// ignorePattern is one line of a .gitignore file (or an airlock.toml
// exclude), parsed.
type ignorePattern struct {
	glob    string // wildmatch pattern, without "!", leading "/" or trailing "/"
	base    string // directory of the .gitignore, "" for the root
	negate  bool   // "!pattern": re-include
	dirOnly bool   // "pattern/": directories only
	noDir   bool   // no slash in the pattern: match the basename at any depth
	source  string // "sub/.gitignore:3" for reports
	text    string // the line as written, for reports
}

// parseIgnore parses the content of a gitignore-syntax file living in
// directory base ("" for the root); source names it in reports.
func parseIgnore(data []byte, base, source string) []ignorePattern {
	data = bytes.TrimPrefix(data, []byte("\xef\xbb\xbf")) // UTF-8 BOM
	var out []ignorePattern
	for i, line := range strings.Split(string(data), "\n") {
		line = strings.TrimSuffix(line, "\r")
		p, ok := parseIgnoreLine(line, base)
		if !ok {
			continue
		}
		p.source = source + ":" + strconv.Itoa(i+1)
		out = append(out, p)
	}
	return out
}

func parseIgnoreLine(line, base string) (ignorePattern, bool) {
	if line == "" || line[0] == '#' {
		return ignorePattern{}, false
	}
	line = trimTrailingSpaces(line)
	p := ignorePattern{base: base, text: line}
	if strings.HasPrefix(line, "!") {
		p.negate = true
		line = line[1:]
	}
	if strings.HasSuffix(line, "/") {
		p.dirOnly = true
		line = line[:len(line)-1]
	}
	if line == "" {
		return ignorePattern{}, false
	}
	if !strings.Contains(line, "/") {
		p.noDir = true
	}
	p.glob = strings.TrimPrefix(line, "/")
	if p.glob == "" {
		return ignorePattern{}, false
	}
	return p, true
}

// trimTrailingSpaces drops trailing spaces not escaped by a backslash.
func trimTrailingSpaces(s string) string {
	last := -1
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case ' ':
			if last < 0 {
				last = i
			}
		case '\\':
			i++
			if i >= len(s) {
				return s
			}
			last = -1
		default:
			last = -1
		}
	}
	if last >= 0 {
		return s[:last]
	}
	return s
}

// match reports whether p matches rel (slash-separated, relative to the
// walk root; isDir for directories). Patterns never match paths outside
// their base directory.
func (p *ignorePattern) match(rel string, isDir bool) bool {
	if p.dirOnly && !isDir {
		return false
	}
	if p.noDir {
		name := rel[strings.LastIndexByte(rel, '/')+1:]
		return wildmatch(p.glob, name)
	}
	name := rel
	if p.base != "" {
		if !strings.HasPrefix(rel, p.base+"/") {
			return false
		}
		name = rel[len(p.base)+1:]
	}
	return wildmatch(p.glob, name)
}

// lastMatch returns the last pattern of ps matching rel, as git decides:
// the last matching line wins, deeper files come after shallower ones.
func lastMatch(ps []ignorePattern, rel string, isDir bool) *ignorePattern {
	for i := len(ps) - 1; i >= 0; i-- {
		if ps[i].match(rel, isDir) {
			return &ps[i]
		}
	}
	return nil
}

// wildmatch is git's wildmatch with WM_PATHNAME: "*" and "?" and classes
// never match "/", "**" between slashes matches any number of directories.
func wildmatch(pattern, text string) bool {
	return dowild(pattern, text) == wmMatch
}

const (
	wmMatch = iota
	wmNoMatch
	wmAbortAll
	wmAbortToStarStar
)

func dowild(p, text string) int {
	ti := 0
	for pi := 0; pi < len(p); pi, ti = pi+1, ti+1 {
		pch := p[pi]
		if ti >= len(text) && pch != '*' {
			return wmAbortAll
		}
		var tch byte
		if ti < len(text) {
			tch = text[ti]
		}
		switch pch {
		case '\\':
			pi++
			if pi >= len(p) || tch != p[pi] {
				return wmNoMatch
			}
		case '?':
			if tch == '/' {
				return wmNoMatch
			}
		case '*':
			pi++
			matchSlash := false
			if pi < len(p) && p[pi] == '*' {
				prev := pi - 2 // the character before "**"
				for pi < len(p) && p[pi] == '*' {
					pi++
				}
				if (prev < 0 || p[prev] == '/') &&
					(pi == len(p) || p[pi] == '/' || (p[pi] == '\\' && pi+1 < len(p) && p[pi+1] == '/')) {
					if pi < len(p) && p[pi] == '/' && dowild(p[pi+1:], text[ti:]) == wmMatch {
						return wmMatch
					}
					matchSlash = true
				}
			}
			if pi == len(p) {
				// Trailing "**" matches everything; a trailing "*" only
				// what has no more slashes.
				if !matchSlash && strings.IndexByte(text[ti:], '/') >= 0 {
					return wmNoMatch
				}
				return wmMatch
			}
			if !matchSlash && p[pi] == '/' {
				// "*/": skip to the next slash, consumed by the loop.
				j := strings.IndexByte(text[ti:], '/')
				if j < 0 {
					return wmNoMatch
				}
				ti += j
				continue
			}
			for ; ti < len(text); ti++ {
				tch = text[ti]
				r := dowild(p[pi:], text[ti:])
				if r != wmNoMatch {
					if !matchSlash || r != wmAbortToStarStar {
						return r
					}
				} else if !matchSlash && tch == '/' {
					return wmAbortToStarStar
				}
			}
			return wmAbortAll
		case '[':
			pi++
			if pi >= len(p) {
				return wmAbortAll
			}
			pc := p[pi]
			negated := false
			if pc == '!' || pc == '^' {
				negated = true
				pi++
				if pi >= len(p) {
					return wmAbortAll
				}
				pc = p[pi]
			}
			var prev byte
			matched := false
			for {
				if pi >= len(p) {
					return wmAbortAll
				}
				pc = p[pi]
				switch {
				case pc == '\\':
					pi++
					if pi >= len(p) {
						return wmAbortAll
					}
					pc = p[pi]
					if tch == pc {
						matched = true
					}
				case pc == '-' && prev != 0 && pi+1 < len(p) && p[pi+1] != ']':
					pi++
					pc = p[pi]
					if pc == '\\' {
						pi++
						if pi >= len(p) {
							return wmAbortAll
						}
						pc = p[pi]
					}
					if tch <= pc && tch >= prev {
						matched = true
					}
					pc = 0
				case pc == '[' && pi+1 < len(p) && p[pi+1] == ':':
					s := pi + 2
					e := s
					for e < len(p) && p[e] != ']' {
						e++
					}
					if e >= len(p) {
						return wmAbortAll
					}
					if e-s-1 < 0 || p[e-1] != ':' {
						// No ":]": a plain '['.
						pc = '['
						if tch == pc {
							matched = true
						}
						break
					}
					ok, known := charClass(p[s:e-1], tch)
					if !known {
						return wmAbortAll
					}
					if ok {
						matched = true
					}
					pi = e
					pc = 0
				default:
					if tch == pc {
						matched = true
					}
				}
				prev = pc
				pi++
				if pi >= len(p) {
					return wmAbortAll
				}
				if p[pi] == ']' {
					break
				}
			}
			if matched == negated || tch == '/' {
				return wmNoMatch
			}
		default:
			if tch != pch {
				return wmNoMatch
			}
		}
	}
	if ti < len(text) {
		return wmNoMatch
	}
	return wmMatch
}

// charClass evaluates a POSIX class such as "alpha" on an ASCII byte.
func charClass(name string, c byte) (matched, known bool) {
	isUpper := c >= 'A' && c <= 'Z'
	isLower := c >= 'a' && c <= 'z'
	isDigit := c >= '0' && c <= '9'
	switch name {
	case "alnum":
		return isUpper || isLower || isDigit, true
	case "alpha":
		return isUpper || isLower, true
	case "blank":
		return c == ' ' || c == '\t', true
	case "cntrl":
		return c < 0x20 || c == 0x7f, true
	case "digit":
		return isDigit, true
	case "graph":
		return c > 0x20 && c < 0x7f, true
	case "lower":
		return isLower, true
	case "print":
		return c >= 0x20 && c < 0x7f, true
	case "punct":
		return c > 0x20 && c < 0x7f && !isUpper && !isLower && !isDigit, true
	case "space":
		return c == ' ' || (c >= '\t' && c <= '\r'), true
	case "upper":
		return isUpper, true
	case "xdigit":
		return isDigit || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'), true
	}
	return false, false
}
