package review

import (
	"fmt"
	"path"
	"strings"
	"unicode/utf8"
)

// PathError reports a path from the guest that Airlock refuses to touch.
type PathError struct {
	Path   string
	Reason string
}

func (e *PathError) Error() string {
	return fmt.Sprintf("unsafe path %q from the sandbox: %s; nothing was written for it", e.Path, e.Reason)
}

// ValidatePath checks that p, a path that came from the guest, is a
// relative, clean, slash-separated path inside the project: not empty, not
// absolute, no "." or ".." element, no empty element, no NUL, no backslash,
// valid UTF-8, and not inside the project's .git directory.
func ValidatePath(p string) error {
	bad := func(reason string) error { return &PathError{Path: p, Reason: reason} }
	switch {
	case p == "":
		return bad("empty")
	case strings.IndexByte(p, 0) >= 0:
		return bad("contains a NUL byte")
	case !utf8.ValidString(p):
		return bad("not valid UTF-8")
	case strings.HasPrefix(p, "/"):
		return bad("absolute")
	case strings.IndexByte(p, '\\') >= 0:
		return bad("contains a backslash")
	case len(p) > 4096:
		return bad("longer than 4096 bytes")
	}
	for _, elem := range strings.Split(p, "/") {
		switch elem {
		case "":
			return bad("has an empty element")
		case ".", "..":
			return bad("has a " + elem + " element")
		}
		if len(elem) > 255 {
			return bad("has an element longer than 255 bytes")
		}
		if strings.EqualFold(elem, ".git") {
			return bad("is inside .git")
		}
	}
	if path.Clean(p) != p {
		return bad("not clean")
	}
	return nil
}
