package review

// TreeNode is what a path of a tree holds, for LinkEscape: a directory, a
// symbolic link with its target, or (the zero value) a file.
type TreeNode struct {
	Dir    bool
	Link   bool
	Target string
}

// LinkEscape follows the symbolic link at link through a tree that is not
// on disk (a commit's, with the approved changes: keys are clean paths
// relative to the project's root, a path missing being nothing), as
// Apply judges links on the project, and returns how it leads out of the
// root ("its target climbs above the project's root through d1 -> ".""),
// or "" when it stays inside.
func LinkEscape(link string, tree map[string]TreeNode) string {
	esc, _ := resolveLink(link, func(p string) (linkNode, string, error) {
		n := tree[p]
		switch {
		case n.Link:
			return nodeLink, n.Target, nil
		case n.Dir:
			return nodeDir, "", nil
		}
		return nodeOther, "", nil
	})
	if esc == nil {
		return ""
	}
	return "its target " + esc.String()
}
