package review

import (
	"errors"
	"fmt"
	"io/fs"
	"path"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"

	"github.com/airlock-dev/airlock/sync/manifest"
)

// maxLinkHops is how many links one resolution may follow, as Linux's
// MAXSYMLINKS; past it the kernel gives up with ELOOP.
const maxLinkHops = 40

// linkLookup reports what p, a clean relative path whose parents are all
// directories, holds: a directory, a symbolic link (and its target), or
// something else (nothing, a file).
type linkLookup func(p string) (node linkNode, target string, err error)

// linkNode is what a path holds, for resolveLink.
type linkNode int

const (
	nodeOther linkNode = iota // nothing, or a file
	nodeDir
	nodeLink
)

// linkEscape says how a symbolic link leads out of the project.
type linkEscape struct {
	// Reason is the words for it, to follow "its target": "leads to an
	// absolute path", "climbs above the project's root", "goes through
	// more than 40 links (a loop?)".
	Reason string
	// Through lists the other links the chain goes through, as
	// `d1 -> "."`.
	Through []string
}

func (e *linkEscape) String() string {
	if len(e.Through) == 0 {
		return e.Reason
	}
	return e.Reason + " through " + strings.Join(e.Through, ", then ")
}

// resolveLink follows the symbolic link at linkPath through the tree that
// lookup describes, component by component as the kernel does (a ".."
// after a link goes up from where the link led, not lexically), and
// returns nil when wherever it leads stays inside the root, or how it
// escapes. A missing component, or one that is a file, is taken as a
// directory that could appear later, so "inside" keeps holding if one
// does; a chain of more than maxLinkHops links is refused too.
func resolveLink(linkPath string, lookup linkLookup) (*linkEscape, error) {
	var (
		cur     []string // where the walk stands, below the root
		real    int      // how many of cur are directories of the tree
		hops    int
		through []string
		rest    = splitPath(linkPath)
	)
	for len(rest) > 0 {
		c := rest[0]
		rest = rest[1:]
		switch c {
		case "", ".":
			continue
		case "..":
			if len(cur) == 0 {
				return &linkEscape{Reason: "climbs above the project's root", Through: through}, nil
			}
			cur = cur[:len(cur)-1]
			real = min(real, len(cur))
			continue
		}
		if len(cur) > real {
			cur = append(cur, c) // under something missing: no lookup
			continue
		}
		p := strings.Join(append(cur[:len(cur):len(cur)], c), "/")
		node, target, err := lookup(p)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", p, err)
		}
		switch node {
		case nodeDir:
			cur = append(cur, c)
			real = len(cur)
			continue
		case nodeOther:
			cur = append(cur, c)
			continue
		}
		hops++
		if hops > maxLinkHops {
			return &linkEscape{Reason: fmt.Sprintf("goes through more than %d links (a loop?)", maxLinkHops), Through: through}, nil
		}
		if hop := p + " -> " + strconv.Quote(target); p != linkPath && !slices.Contains(through, hop) {
			through = append(through, hop)
		}
		if target == "" || strings.HasPrefix(target, "/") || strings.IndexByte(target, 0) >= 0 {
			return &linkEscape{Reason: "leads to an absolute path", Through: through}, nil
		}
		rest = append(splitPath(target), rest...)
	}
	return nil, nil
}

func splitPath(p string) []string {
	return strings.Split(p, "/")
}

// linkNode answers linkLookup for the project as it is now, through its
// root.
func (pr *project) linkNode(p string) (linkNode, string, error) {
	fi, err := pr.root.Lstat(p)
	switch {
	case errors.Is(err, fs.ErrNotExist), errors.Is(err, syscall.ENOTDIR):
		return nodeOther, "", nil
	case err != nil:
		return nodeOther, "", err
	case fi.Mode()&fs.ModeSymlink != 0:
		target, err := pr.root.Readlink(p)
		return nodeLink, target, err
	case fi.IsDir():
		return nodeDir, "", nil
	}
	return nodeOther, "", nil
}

// afterTree is the project as it will be once steps are done: what the
// steps leave at their paths, over what the project holds now.
type afterTree struct {
	pr    *project
	after map[string]EntryState
	fresh map[string]bool // directories created where none is now
	// parents are the directories above what the steps leave: the apply
	// makes the missing ones.
	parents map[string]bool
}

func newAfterTree(pr *project, planned []plannedFile) *afterTree {
	t := &afterTree{pr: pr, after: map[string]EntryState{}, fresh: map[string]bool{}, parents: map[string]bool{}}
	for _, pf := range planned {
		for _, s := range pf.steps {
			t.after[s.Path] = s.After
			if s.After.Type == manifest.Dir && s.Before.Type != manifest.Dir {
				t.fresh[s.Path] = true
			}
			if s.After.Exists {
				for dir := path.Dir(s.Path); dir != "."; dir = path.Dir(dir) {
					t.parents[dir] = true
				}
			}
		}
	}
	return t
}

func (t *afterTree) lookup(p string) (linkNode, string, error) {
	if s, ok := t.after[p]; ok {
		switch {
		case !s.Exists:
			return nodeOther, "", nil
		case s.Type == manifest.Symlink:
			return nodeLink, s.Target, nil
		case s.Type == manifest.Dir:
			return nodeDir, "", nil
		}
		return nodeOther, "", nil
	}
	for dir := path.Dir(p); dir != "."; dir = path.Dir(dir) {
		if t.fresh[dir] {
			return nodeOther, "", nil // a new directory holds only what the steps put there
		}
	}
	node, target, err := t.pr.linkNode(p)
	if err == nil && node == nodeOther && t.parents[p] {
		// A parent the apply makes: a directory, holding only what the
		// steps put there (a link created in it is followed from it).
		return nodeDir, "", nil
	}
	return node, target, err
}

// refuseEscapingLinks drops the planned files that create a symbolic link
// leading out of the project, judged on the project as it will be after
// the apply (the other links created, the user's own links). Dropping one
// changes that tree, so it looks again until nothing more is dropped.
func (a *applier) refuseEscapingLinks(planned []plannedFile) (kept []plannedFile, refused []FileResult) {
	for {
		tree := newAfterTree(a.pr, planned)
		kept = kept[:0:0]
		n := len(refused)
		for _, pf := range planned {
			if reason := linksReason(pf.steps, tree.lookup); reason != "" {
				r := pf.result
				r.BeforeSHA256, r.AfterSHA256, r.Reason = "", "", reason
				refused = append(refused, r)
				continue
			}
			kept = append(kept, pf)
		}
		if len(refused) == n {
			return kept, refused
		}
		planned = kept
	}
}

// linksReason says why a link the steps create may not be, or "".
func linksReason(steps []Step, lookup linkLookup) string {
	for _, s := range steps {
		if !s.After.Exists || s.After.Type != manifest.Symlink {
			continue
		}
		esc, err := resolveLink(s.Path, lookup)
		switch {
		case err != nil:
			return fmt.Sprintf("symbolic link %s could not be checked (%v); not created", s.Path, err)
		case esc != nil:
			return fmt.Sprintf("symbolic link %s points outside the project: its target %q %s; not created (if you meant it, make the link yourself after the apply)", s.Path, s.After.Target, esc)
		}
	}
	return ""
}

// checkCreatedLinks asks the kernel, through the project's os.Root (which
// refuses to resolve anything leading out of it), where each link the
// steps created leads. A link that does not resolve (dangling, through a
// file) cannot lead anywhere and passes; os.Root gives up after fewer
// links than the kernel, so a long chain is followed by resolveLink over
// the project as it now is.
func (a *applier) checkCreatedLinks(steps []Step) error {
	final := map[string]EntryState{}
	for _, s := range steps {
		final[s.Path] = s.After
	}
	var links []string
	for p, st := range final {
		if st.Exists && st.Type == manifest.Symlink {
			links = append(links, p)
		}
	}
	sort.Strings(links)
	for _, p := range links {
		_, err := a.pr.root.Stat(p)
		switch {
		case err == nil, errors.Is(err, fs.ErrNotExist), errors.Is(err, syscall.ENOTDIR):
			continue
		case errors.Is(err, syscall.ELOOP):
			esc, rerr := resolveLink(p, a.pr.linkNode)
			if rerr == nil && esc == nil {
				continue
			}
			if esc != nil {
				err = errors.New("its target " + esc.String())
			} else {
				err = rerr
			}
		}
		return fmt.Errorf("symbolic link %s -> %q leads outside the project once written (%v); something in the project changed during the apply (a directory replaced by a link?): look at the project, then apply again", p, final[p].Target, err)
	}
	return nil
}
