// Package promote takes the changes a sandbox's review approved into the
// project's history with the host's git, run as the user, never through
// a shell: a commit on the current branch (ApplyCommit: the apply, then
// a commit of exactly the paths it wrote), a commit on a new branch from
// the baseline's commit built in a temporary index (Branch), a patch or
// an mbox (Export), and a push of that branch with a pull request that
// gh opens (Push); CommitMessage makes their message from the agent's
// summary or final message. It runs the user's merge tool on a
// conflict of an apply (MergeTool), and reads the commit a baseline was
// taken at (HeadCommit). What it did is kept in the sandbox store:
// Meta.Promotion, the stage, the audit log.
//
// It must not import vm, guest, app/machine/launch, app/machine/vmhost, app/pipeline,
// app/plan, app/cli, app/gui or fyne: promotion works on a stored sandbox
// and needs no VM. app/sandbox, the store, must not import it.
package promote

import (
	"context"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"maps"
	"mime"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/airlock-dev/airlock/app/sandbox"
	"github.com/airlock-dev/airlock/internal/safetext"
	"github.com/airlock-dev/airlock/review"
	"github.com/airlock-dev/airlock/sync/manifest"
)

// Message is a commit message made for a sandbox's changes.
type Message struct {
	Subject string `json:"subject"`
	Body    string `json:"body,omitempty"`
	// Trailers are "Key: value" lines, in order.
	Trailers []string `json:"trailers"`
}

// String is the message as git keeps it: subject, body, trailers, each
// paragraph apart.
func (msg Message) String() string {
	var b strings.Builder
	b.WriteString(msg.Subject)
	b.WriteString("\n\n")
	if msg.Body != "" {
		b.WriteString(msg.Body)
		b.WriteString("\n\n")
	}
	for _, t := range msg.Trailers {
		b.WriteString(t)
		b.WriteByte('\n')
	}
	return b.String()
}

// maxSubject caps a subject taken from the agent's words, in characters.
const maxSubject = 100

// trailerLike is a line that reads as one of Airlock's trailers.
var trailerLike = regexp.MustCompile(`(?i)^airlock-[a-z-]*:`)

// CommitMessage is the message of a commit of the sandbox's changes:
// override (the user's -m) when given, else the agent's summary
// (.airlock/summary.md: its first line the subject, the rest the body),
// else its final message, else "Changes from Airlock sandbox ID"; with the
// trailers Airlock-Sandbox, Airlock-Agent and Airlock-Verify. The agent's
// words are made safe to show on a terminal (safetext), since git log
// prints them as they are, and a line of theirs that looks like one of
// Airlock's trailers is indented so that it is not read as one.
func CommitMessage(sb *sandbox.Sandbox, m sandbox.Meta, override string) (Message, error) {
	text, guest := override, false
	if strings.TrimSpace(text) == "" {
		s, err := sb.Summary()
		if err != nil {
			return Message{}, err
		}
		if strings.TrimSpace(s) == "" {
			if s, err = sb.FinalMessage(); err != nil {
				return Message{}, err
			}
		}
		text, guest = s, true
	}
	var msg Message
	text = strings.TrimSpace(strings.ReplaceAll(text, "\r\n", "\n"))
	subject, body, _ := strings.Cut(text, "\n")
	if guest {
		subject = strings.TrimSpace(strings.TrimLeft(safetext.Line(subject), "#"))
		subject = safetext.Cut(subject, maxSubject)
		lines := strings.Split(safetext.Text(body), "\n")
		for i, l := range lines {
			if trailerLike.MatchString(l) {
				lines[i] = "  " + l
			}
		}
		body = strings.Join(lines, "\n")
	}
	msg.Subject, msg.Body = strings.TrimSpace(subject), strings.TrimSpace(body)
	if msg.Subject == "" {
		msg.Subject = "Changes from Airlock sandbox " + sb.ID
	}
	agent := m.Agent
	if agent == "" {
		agent = m.CommandArgv()
	}
	agent = safetext.Cut(safetext.Line(agent), 200)
	msg.Trailers = []string{"Airlock-Sandbox: " + sb.ID, "Airlock-Agent: " + agent, "Airlock-Verify: " + m.VerifyWord()}
	return msg, nil
}

// withReceipt adds the trailer Airlock-Receipt to msg: the hash of the
// last line of the sandbox's audit log as the commit is made, the
// audit_head of the receipt airlock audit export writes then. A log that
// does not verify gives no trailer and a note saying so.
func withReceipt(sb *sandbox.Sandbox, msg Message, notes []string) (Message, []string) {
	res, err := sb.VerifyAudit()
	if err != nil || res.Head == "" {
		return msg, append(notes, fmt.Sprintf("no Airlock-Receipt trailer: the sandbox's audit log does not verify (airlock audit verify %s says why)", sb.ID))
	}
	msg.Trailers = append(slices.Clip(msg.Trailers), "Airlock-Receipt: "+res.Head)
	return msg, notes
}

// receiptBlock is the sandbox's signed receipt for a pull request's
// body, "" when its audit log does not verify.
func receiptBlock(sb *sandbox.Sandbox) string {
	r, err := sb.Receipt()
	if err != nil {
		return ""
	}
	data, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return ""
	}
	return "\n\nAirlock receipt (hashes only; airlock audit verify --receipt FILE checks it):\n\n```json\n" + string(data) + "\n```\n"
}

// CommitOptions are the choices of a commit of a sandbox's changes.
type CommitOptions struct {
	// Message is the user's message; empty, CommitMessage makes one.
	Message string
	// Branch, when set, makes the commit on this new branch from the
	// baseline's commit, without touching the working tree or the index
	// (Branch); empty, the changes are applied and committed on the
	// current branch (ApplyCommit).
	Branch string
}

// CommitResult is a commit made of a sandbox's changes.
type CommitResult struct {
	sandbox.Promotion
	Message Message `json:"message"`
	// Paths are the project paths the commit changes.
	Paths []string `json:"paths"`
	// Notes say what a person should know: the baseline's commit was
	// not recorded, a path was left out as ignored, ...
	Notes []string `json:"notes,omitempty"`
}

// checkIndex refuses an index holding staged changes: a commit would
// take them along with the sandbox's.
func (g *gitRepo) checkIndex(ctx context.Context) error {
	out, err := g.run(ctx, nil, "diff", "--cached", "--name-only", "-z")
	if err != nil {
		return err
	}
	if staged := strings.Split(strings.TrimRight(string(out), "\x00"), "\x00"); len(out) > 0 {
		more := ""
		if len(staged) > 1 {
			more = fmt.Sprintf(" and %d more", len(staged)-1)
		}
		return fmt.Errorf("the index holds changes you staged (%s%s), which the commit would take along with the sandbox's: commit or unstage them first (git commit, or git restore --staged PATH), or use --branch, which leaves the index alone", safetext.Line(staged[0]), more)
	}
	return nil
}

// ApplyCommit applies the changes d approves into the project (ApplyWith:
// journalled, undoable) and commits exactly the paths it wrote on the
// current branch, with CommitMessage. A project that is not in a git
// repository, or whose index holds staged changes, is refused before
// anything is written. The result is nil (and the apply's result says
// why) when nothing was written.
func ApplyCommit(ctx context.Context, sb *sandbox.Sandbox, d review.Decisions, opts sandbox.ApplyOptions, copts CommitOptions) (*sandbox.ApplyResult, *CommitResult, error) {
	m, err := sb.Meta()
	if err != nil {
		return nil, nil, err
	}
	g, err := openGit(ctx, m.Project)
	if err != nil {
		return nil, nil, fmt.Errorf("commit: %w", err)
	}
	if err := g.checkIndex(ctx); err != nil {
		return nil, nil, fmt.Errorf("commit: nothing was applied: %w", err)
	}
	msg, err := CommitMessage(sb, m, copts.Message)
	if err != nil {
		return nil, nil, err
	}
	dirty, err := g.uncommitted(ctx, sb, d)
	if err != nil {
		return nil, nil, err
	}
	res, err := sb.ApplyWith(ctx, d, opts)
	if err != nil || res.Held {
		return res, nil, err
	}
	var paths []string
	add := func(fs []review.FileResult) {
		for _, f := range fs {
			if f.Resolution == review.KeepMine {
				continue
			}
			for _, p := range []string{f.OldPath, f.Path} {
				if p != "" && !slices.Contains(paths, p) {
					paths = append(paths, p)
				}
			}
		}
	}
	add(res.Applied)
	add(res.Merged)
	add(res.Resolved)
	slices.Sort(paths)
	cr := &CommitResult{Message: msg}
	if len(paths) == 0 {
		return res, nil, nil
	}
	ignored, err := g.ignored(ctx, paths)
	if err != nil {
		return res, nil, err
	}
	var present, gone, withYours []string
	for _, p := range paths {
		if ignored[p] {
			cr.Notes = append(cr.Notes, fmt.Sprintf("%s left out of the commit: git ignores it (.gitignore); it is applied", safetext.Line(p)))
			continue
		}
		cr.Paths = append(cr.Paths, p)
		if dirty[p] {
			withYours = append(withYours, p)
		}
		if _, err := os.Lstat(filepath.Join(m.Project, filepath.FromSlash(p))); err == nil {
			present = append(present, literal(p))
		} else {
			gone = append(gone, literal(p))
		}
	}
	if len(withYours) > 0 {
		cr.Notes = append(cr.Notes, fmt.Sprintf("%s had changes of yours not committed; the commit takes %s whole, with them", listPaths(withYours), plural(len(withYours), "it", "them")))
	}
	staged := "the changes are applied"
	if len(present) > 0 {
		if _, err := g.run(ctx, nil, append([]string{"add", "--all", "--"}, present...)...); err != nil {
			return res, nil, fmt.Errorf("commit: %s but not staged: %w (airlock undo %s takes them back)", staged, err, sb.ID)
		}
	}
	if len(gone) > 0 {
		if _, err := g.run(ctx, nil, append([]string{"rm", "-r", "--cached", "--quiet", "--ignore-unmatch", "--"}, gone...)...); err != nil {
			return res, nil, fmt.Errorf("commit: %s but not staged: %w (airlock undo %s takes them back)", staged, err, sb.ID)
		}
	}
	if len(present)+len(gone) > 0 {
		staged = "the changes are applied and staged"
	}
	if _, err := g.run(ctx, nil, "diff", "--cached", "--quiet"); err == nil {
		cr.Notes = append(cr.Notes, "nothing to commit: git already has every applied change")
		return res, cr, nil
	}
	parent, err := g.head(ctx)
	if err != nil {
		return res, nil, err
	}
	msg, cr.Notes = withReceipt(sb, msg, cr.Notes)
	cr.Message = msg
	if _, err := g.run(ctx, []byte(msg.String()), "commit", "--quiet", "--file=-"); err != nil {
		return res, nil, fmt.Errorf("commit: %s, but git commit failed: %w; commit them yourself, or airlock undo %s", staged, err, sb.ID)
	}
	commit, err := g.line(ctx, "rev-parse", "HEAD")
	if err != nil {
		return res, nil, err
	}
	branch, _ := g.line(ctx, "symbolic-ref", "--quiet", "--short", "HEAD")
	cr.Promotion = sandbox.Promotion{Commit: commit, Parent: parent, Branch: branch, Time: sb.Store().Now().UTC()}
	return res, cr, recordCommit(sb, cr)
}

// uncommitted returns which of the paths d touches differ between the
// working tree and HEAD before the apply: a commit of the file takes the
// user's changes to it too. Nothing in a repository without commits.
func (g *gitRepo) uncommitted(ctx context.Context, sb *sandbox.Sandbox, d review.Decisions) (map[string]bool, error) {
	cs, err := sb.Changeset(ctx)
	if err != nil {
		return nil, err
	}
	var specs []string
	for _, f := range cs.Files {
		for _, o := range d.Resolve(f) {
			specs = append(specs, literal(o.Path))
		}
	}
	dirty := map[string]bool{}
	if h, err := g.head(ctx); err != nil || h == "" || len(specs) == 0 {
		return dirty, err
	}
	out, err := g.run(ctx, nil, append([]string{"diff", "--name-only", "--relative", "-z", "HEAD", "--"}, specs...)...)
	if err != nil {
		return nil, err
	}
	for _, p := range strings.Split(string(out), "\x00") {
		if p != "" {
			dirty[p] = true
		}
	}
	return dirty, nil
}

// recordCommit writes the commit into sandbox.json and the audit log.
func recordCommit(sb *sandbox.Sandbox, cr *CommitResult) error {
	if err := sb.Audit(sandbox.Event{Event: sandbox.EventCommitted, Data: map[string]any{
		"commit": cr.Commit, "parent": cr.Parent, "branch": cr.Branch, "new_branch": cr.NewBranch,
		"paths": cr.Paths, "subject": cr.Message.Subject,
	}}); err != nil {
		return err
	}
	p := cr.Promotion
	_, err := sb.Update(func(m *sandbox.Meta) { m.Promotion = &p })
	return err
}

// ignored returns which of paths (untracked) git ignores.
func (g *gitRepo) ignored(ctx context.Context, paths []string) (map[string]bool, error) {
	in := strings.Join(paths, "\x00") + "\x00"
	out, err := g.run(ctx, []byte(in), "check-ignore", "-z", "--stdin")
	if err != nil && exitCode(err) != 1 {
		return nil, err
	}
	got := map[string]bool{}
	for _, p := range strings.Split(string(out), "\x00") {
		if p != "" {
			got[p] = true
		}
	}
	return got, nil
}

// ErrBranchExists means the branch asked for exists already.
var ErrBranchExists = errors.New("branch exists already")

// Branch commits the changes d approves on a new branch made from the
// baseline's commit (Meta.BaselineCommit; HEAD, with a note, in a sandbox
// from before it was kept), without touching the working tree or the
// index: the tree is built in a temporary index from the baseline's commit
// and the approved files' new contents, committed with git commit-tree,
// and the branch created with git update-ref. An existing branch is
// refused. Nothing is written to the project; the sandbox's status stays
// as it was.
func Branch(ctx context.Context, sb *sandbox.Sandbox, d review.Decisions, copts CommitOptions) (*CommitResult, error) {
	m, err := sb.Meta()
	if err != nil {
		return nil, err
	}
	if m.Status != sandbox.StatusReady && m.Status != sandbox.StatusApplied {
		return nil, fmt.Errorf("branch %s: it is %s: %w", sb.ID, m.Status, sandbox.ErrNotReady)
	}
	g, err := openGit(ctx, m.Project)
	if err != nil {
		return nil, fmt.Errorf("branch: %w", err)
	}
	name := copts.Branch
	if _, err := g.run(ctx, nil, "check-ref-format", "--branch", name); err != nil || strings.HasPrefix(name, "-") {
		return nil, fmt.Errorf("branch: %q is not a valid branch name", name)
	}
	if _, err := g.run(ctx, nil, "rev-parse", "--verify", "--quiet", "refs/heads/"+name); err == nil {
		return nil, fmt.Errorf("branch %s: %w: choose another name, or delete it (git branch -D %s)", name, ErrBranchExists, name)
	}
	cr := &CommitResult{}
	base := m.BaselineCommit
	if base == "" {
		if base, err = g.head(ctx); err != nil {
			return nil, err
		}
		if base == "" {
			return nil, fmt.Errorf("branch: the repository of %s has no commit yet to branch from: make a first commit", m.Project)
		}
		cr.Notes = append(cr.Notes, fmt.Sprintf("this sandbox did not record the commit its baseline was taken at; the branch starts at HEAD (%s)", short(base)))
	}
	if _, err := g.run(ctx, nil, "cat-file", "-e", base+"^{commit}"); err != nil {
		return nil, fmt.Errorf("branch: the baseline's commit %s is not in the repository any more", short(base))
	}
	cs, err := sb.Changeset(ctx)
	if err != nil {
		return nil, err
	}
	if cr.Message, err = CommitMessage(sb, m, copts.Message); err != nil {
		return nil, err
	}
	tmp, err := os.MkdirTemp("", "airlock-index-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)
	ig := *g
	ig.env = []string{"GIT_INDEX_FILE=" + filepath.Join(tmp, "index")}
	if _, err := ig.run(ctx, nil, "read-tree", base); err != nil {
		return nil, err
	}
	outs, err := branchOutcomes(ctx, g, base, cs, d, cr)
	if err != nil {
		return nil, err
	}
	var removals, additions strings.Builder
	zero := strings.Repeat("0", len(base))
	for _, out := range outs {
		p := g.prefix + out.Path
		if !slices.Contains(cr.Paths, out.Path) {
			cr.Paths = append(cr.Paths, out.Path)
		}
		if !out.Exists || out.Type == manifest.Dir {
			// A directory is not in git's index; one that replaces a
			// file removes the file.
			fmt.Fprintf(&removals, "0 %s\t%s\x00", zero, p)
			continue
		}
		mode := "100644"
		switch {
		case out.Type == manifest.Symlink:
			mode = "120000"
		case out.Mode&0o100 != 0:
			mode = "100755"
		}
		id, err := ig.run(ctx, out.Content, "hash-object", "-w", "--no-filters", "--stdin")
		if err != nil {
			return nil, err
		}
		fmt.Fprintf(&additions, "%s %s\t%s\x00", mode, strings.TrimSpace(string(id)), p)
	}
	if _, err := ig.run(ctx, []byte(removals.String()+additions.String()), "update-index", "-z", "--index-info"); err != nil {
		return nil, err
	}
	tree, err := ig.line(ctx, "write-tree")
	if err != nil {
		return nil, err
	}
	if baseTree, _ := g.line(ctx, "rev-parse", base+"^{tree}"); baseTree == tree {
		return nil, fmt.Errorf("branch: nothing to commit: the approved changes leave the baseline's commit %s as it is", short(base))
	}
	cr.Message, cr.Notes = withReceipt(sb, cr.Message, cr.Notes)
	commit, err := g.run(ctx, []byte(cr.Message.String()), "commit-tree", tree, "-p", base, "-F", "-")
	if err != nil {
		return nil, err
	}
	cr.Commit = strings.TrimSpace(string(commit))
	if _, err := g.run(ctx, nil, "update-ref", "-m", "airlock: branch from sandbox "+sb.ID, "refs/heads/"+name, cr.Commit, ""); err != nil {
		return nil, fmt.Errorf("branch %s: %w", name, err)
	}
	cr.Parent, cr.Branch, cr.NewBranch, cr.Time = base, name, true, sb.Store().Now().UTC()
	slices.Sort(cr.Paths)
	return cr, recordCommit(sb, cr)
}

// branchOutcomes are what the paths d approves become on a branch from
// base, as Apply would leave them out: a change that needs another one d
// leaves out (review.Decisions.Needs), and a symbolic link that leads out
// of the project in the tree of the branch (review.LinkEscape, the links
// of base included) are not taken, each with a note in cr.
func branchOutcomes(ctx context.Context, g *gitRepo, base string, cs *review.Changeset, d review.Decisions, cr *CommitResult) ([]review.Outcome, error) {
	needs := map[string]string{}
	for _, n := range d.Needs(cs) {
		needs[n.Path] = n.Error()
	}
	var outs []review.Outcome
	for _, f := range cs.Files {
		if r, ok := needs[f.Path]; ok {
			cr.Notes = append(cr.Notes, fmt.Sprintf("%s left out: %s", safetext.Line(f.Path), safetext.Line(r)))
			continue
		}
		outs = append(outs, d.Resolve(f)...)
	}
	// The tree of base under the project, then the outcomes over it.
	baseTree := map[string]review.TreeNode{}
	blobs := map[string]string{}
	out, err := g.run(ctx, nil, "ls-tree", "-r", "-t", "-z", "--full-tree", base)
	if err != nil {
		return nil, err
	}
	hasLinks := slices.ContainsFunc(outs, func(o review.Outcome) bool { return o.Exists && o.Type == manifest.Symlink })
	for _, rec := range strings.Split(string(out), "\x00") {
		meta, p, ok := strings.Cut(rec, "\t")
		if !ok || !strings.HasPrefix(p, g.prefix) || p == strings.TrimSuffix(g.prefix, "/") {
			continue
		}
		p = strings.TrimPrefix(p, g.prefix)
		fields := strings.Fields(meta)
		if len(fields) == 3 && fields[1] == "blob" {
			blobs[p] = fields[2]
		}
		switch {
		case len(fields) == 3 && fields[1] == "tree":
			baseTree[p] = review.TreeNode{Dir: true}
		case len(fields) == 3 && fields[0] == "120000" && hasLinks:
			target, err := g.run(ctx, nil, "cat-file", "blob", fields[2])
			if err != nil {
				return nil, err
			}
			baseTree[p] = review.TreeNode{Link: true, Target: string(target)}
		default:
			baseTree[p] = review.TreeNode{}
		}
	}
	// A file the user had changed without committing when the baseline
	// was taken is in the sandbox with those changes: the branch takes
	// them along.
	var uncommitted []string
	for _, f := range cs.Files {
		if _, touched := d.Selection(f); !touched || f.Old == nil || f.Old.Type == manifest.Dir {
			continue
		}
		old := f.Path
		if f.Status == review.Renamed {
			old = f.OldPath
		}
		if id, ok := blobs[old]; !ok || id != gitBlobID(f.OldContent(), len(id)) {
			uncommitted = append(uncommitted, old)
		}
	}
	if len(uncommitted) > 0 {
		cr.Notes = append(cr.Notes, fmt.Sprintf("%s had changes not committed when the sandbox's baseline was taken; the branch takes %s as the sandbox left %s, so with those changes too", listPaths(uncommitted), plural(len(uncommitted), "it", "them"), plural(len(uncommitted), "it", "them")))
	}
	if !hasLinks {
		return outs, nil
	}
	refused := escapingLinks(baseTree, outs)
	kept := outs[:0]
	for _, o := range outs {
		if why := refused[o.Path]; why != "" {
			cr.Notes = append(cr.Notes, fmt.Sprintf("symbolic link %s left out: it points outside the project: %s (make it yourself if you meant it)", safetext.Line(o.Path), safetext.Line(why)))
			continue
		}
		kept = append(kept, o)
	}
	return kept, nil
}

// escapingLinks are the symbolic links among outs that lead out of the
// project in the tree base becomes with outs (those left out taken as
// not made, until no more are found), with the reason of each.
func escapingLinks(base map[string]review.TreeNode, outs []review.Outcome) map[string]string {
	refused := map[string]string{}
	for {
		tree := maps.Clone(base)
		for _, o := range outs {
			switch {
			case refused[o.Path] != "":
			case !o.Exists:
				delete(tree, o.Path)
			case o.Type == manifest.Dir:
				tree[o.Path] = review.TreeNode{Dir: true}
			case o.Type == manifest.Symlink:
				tree[o.Path] = review.TreeNode{Link: true, Target: string(o.Content)}
			default:
				tree[o.Path] = review.TreeNode{}
			}
			for dir := path.Dir(o.Path); o.Exists && dir != "."; dir = path.Dir(dir) {
				tree[dir] = review.TreeNode{Dir: true}
			}
		}
		more := false
		for _, o := range outs {
			if o.Exists && o.Type == manifest.Symlink && refused[o.Path] == "" {
				if why := review.LinkEscape(o.Path, tree); why != "" {
					refused[o.Path], more = why, true
				}
			}
		}
		if !more {
			break
		}
	}
	return refused
}

// manifestTree is the tree of a manifest, for review.LinkEscape.
func manifestTree(m *manifest.Manifest) map[string]review.TreeNode {
	tree := make(map[string]review.TreeNode, len(m.Entries))
	for _, e := range m.Entries {
		switch e.Type {
		case manifest.Dir:
			tree[e.Path] = review.TreeNode{Dir: true}
		case manifest.Symlink:
			tree[e.Path] = review.TreeNode{Link: true, Target: e.Target}
		default:
			tree[e.Path] = review.TreeNode{}
		}
	}
	return tree
}

// gitBlobID is git's id of a blob holding data: SHA-1 for an id of 40
// hex digits, SHA-256 for one of 64.
func gitBlobID(data []byte, n int) string {
	var h hash.Hash = sha1.New()
	if n == 64 {
		h = sha256.New()
	}
	fmt.Fprintf(h, "blob %d\x00", len(data))
	h.Write(data)
	return hex.EncodeToString(h.Sum(nil))
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// listPaths names up to three paths, for a note.
func listPaths(ps []string) string {
	var b strings.Builder
	for i, p := range ps {
		if i == 3 {
			fmt.Fprintf(&b, " and %d more", len(ps)-3)
			break
		}
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(safetext.Line(p))
	}
	return b.String()
}

// short is a commit id as people read it.
func short(id string) string {
	if len(id) > 12 {
		return id[:12]
	}
	return id
}

// Export formats.
const (
	FormatPatch = "patch" // a git patch (git apply)
	FormatMbox  = "mbox"  // one mail git am applies as a commit
)

// Export renders the changes d approves as a git patch (review.Patch,
// binary files as binary patches) or as an mbox that git am applies: a
// From line, From:, Date: and Subject: headers (the author is the
// user's git identity when the project is in a repository), the message
// of CommitMessage with its trailers, "---" and the patch. It records an
// "exported" audit event naming output (where the caller writes it).
func Export(ctx context.Context, sb *sandbox.Sandbox, d review.Decisions, format, message, output string) ([]byte, []review.Skip, error) {
	if format != FormatPatch && format != FormatMbox {
		return nil, nil, fmt.Errorf("export: format %q: want patch or mbox", format)
	}
	m, err := sb.Meta()
	if err != nil {
		return nil, nil, err
	}
	cs, err := sb.Changeset(ctx)
	if err != nil {
		return nil, nil, err
	}
	d, linkSkips, err := withoutEscapingLinks(sb, cs, d)
	if err != nil {
		return nil, nil, err
	}
	patch, skips := review.Patch(cs, d, review.PatchOptions{Binary: true})
	skips = append(linkSkips, skips...)
	out := patch
	if format == FormatMbox {
		msg, err := CommitMessage(sb, m, message)
		if err != nil {
			return nil, nil, err
		}
		out = mbox(author(ctx, m.Project), sb.Store().Now(), msg, patch)
	}
	var files []string
	for _, f := range cs.Files {
		if _, ok := d.Selection(f); ok {
			files = append(files, f.Path)
		}
	}
	if err := sb.Audit(sandbox.Event{Event: sandbox.EventExported, Data: map[string]any{"format": format, "files": files, "output": output, "skipped": skips}}); err != nil {
		return nil, nil, err
	}
	return out, skips, nil
}

// withoutEscapingLinks is d without the symbolic links that would lead
// out of the project once the baseline took d's changes (the export of a
// branch's commit, git am, would make them), each named in a skip.
func withoutEscapingLinks(sb *sandbox.Sandbox, cs *review.Changeset, d review.Decisions) (review.Decisions, []review.Skip, error) {
	var outs []review.Outcome
	for _, f := range cs.Files {
		outs = append(outs, d.Resolve(f)...)
	}
	if !slices.ContainsFunc(outs, func(o review.Outcome) bool { return o.Exists && o.Type == manifest.Symlink }) {
		return d, nil, nil
	}
	base, err := sb.ReadManifest(sandbox.BaselineFile, true)
	if err != nil {
		return d, nil, err
	}
	refused := escapingLinks(manifestTree(sandbox.WithoutMeta(base)), outs)
	if len(refused) == 0 {
		return d, nil, nil
	}
	d.Files = maps.Clone(d.Files)
	var skips []review.Skip
	for _, p := range slices.Sorted(maps.Keys(refused)) {
		delete(d.Files, p)
		skips = append(skips, review.Skip{Path: p, Reason: "symbolic link that points outside the project: " + refused[p]})
	}
	return d, skips, nil
}

// author is the user's git identity ("Name <email>") in the project's
// repository, or Airlock's when there is none.
func author(ctx context.Context, project string) string {
	if g, err := openGit(ctx, project); err == nil {
		if id, err := g.line(ctx, "var", "GIT_AUTHOR_IDENT"); err == nil {
			// "Name <email> 1700000000 +0100": the date is ours.
			if i := strings.LastIndexByte(id, '>'); i > 0 {
				return id[:i+1]
			}
		}
	}
	return "Airlock <airlock@localhost>"
}

// mbox is one mail in the format git format-patch writes.
func mbox(from string, now time.Time, msg Message, patch []byte) []byte {
	var b strings.Builder
	b.WriteString("From 0000000000000000000000000000000000000000 Mon Sep 17 00:00:00 2001\n")
	fmt.Fprintf(&b, "From: %s\n", mime.QEncoding.Encode("utf-8", from))
	fmt.Fprintf(&b, "Date: %s\n", now.Format(time.RFC1123Z))
	fmt.Fprintf(&b, "Subject: [PATCH] %s\n", mime.QEncoding.Encode("utf-8", msg.Subject))
	b.WriteString("MIME-Version: 1.0\nContent-Type: text/plain; charset=UTF-8\nContent-Transfer-Encoding: 8bit\n\n")
	body := msg.String()
	_, rest, _ := strings.Cut(body, "\n\n")
	for _, l := range strings.SplitAfter(rest, "\n") {
		if strings.HasPrefix(l, "From ") {
			l = ">" + l // never a new mail's From line
		}
		b.WriteString(l)
	}
	b.WriteString("---\n")
	b.Write(patch)
	b.WriteString("-- \nAirlock\n\n")
	return []byte(b.String())
}

// PushOptions are the choices of a push of a sandbox's branch.
type PushOptions struct {
	// Branch is the branch to push; empty, the one apply --branch made.
	Branch string
	// Remote is the remote to push to; empty, origin.
	Remote string
	// Stdin and Stderr are git's and gh's, for their prompts and
	// progress (the user's credentials stay between them and the user).
	Stdin  io.Reader
	Stderr io.Writer
}

// PushResult is what Push did.
type PushResult struct {
	Branch string `json:"branch"`
	Remote string `json:"remote"`
	Commit string `json:"commit"`
	// PullRequest is the URL gh printed, when gh opened one.
	PullRequest string `json:"pull_request,omitempty"`
	// Hint says how to open a pull request when gh could not.
	Hint string `json:"hint,omitempty"`
}

// Push pushes the sandbox's branch (the one apply --branch made, or
// opts.Branch) to a remote with the user's own git on this computer,
// with their own credentials (nothing of which ever reaches a VM), and
// when gh is installed opens a pull request with the commit's message as
// its title and body. Without gh, the result's Hint says where to open
// one. A failure of gh after the push is reported in Hint, not as an
// error: the branch is pushed.
func Push(ctx context.Context, sb *sandbox.Sandbox, opts PushOptions) (*PushResult, error) {
	m, err := sb.Meta()
	if err != nil {
		return nil, err
	}
	g, err := openGit(ctx, m.Project)
	if err != nil {
		return nil, fmt.Errorf("push: %w", err)
	}
	name := opts.Branch
	if name == "" {
		if name = lastBranch(sb, m); name == "" {
			return nil, fmt.Errorf("push: sandbox %s has no branch to push: make one with airlock apply %s --all --branch NAME", sb.ID, sb.ID)
		}
	}
	remote := opts.Remote
	if remote == "" {
		remote = "origin"
	}
	if strings.HasPrefix(name, "-") || strings.HasPrefix(remote, "-") {
		return nil, fmt.Errorf("push: %q to %q: a branch or remote cannot start with -", name, remote)
	}
	commit, err := g.line(ctx, "rev-parse", "--verify", "--quiet", "refs/heads/"+name+"^{commit}")
	if err != nil {
		return nil, fmt.Errorf("push: there is no branch %s: make it with airlock apply %s --all --branch %s", name, sb.ID, name)
	}
	if _, err := g.run(ctx, nil, "remote", "get-url", remote); err != nil {
		return nil, fmt.Errorf("push: the repository has no remote %q (git remote -v lists them; --remote NAME chooses one)", remote)
	}
	stderr := opts.Stderr
	if stderr == nil {
		stderr = io.Discard
	}
	push := exec.CommandContext(ctx, "git", "push", remote, "refs/heads/"+name+":refs/heads/"+name)
	push.Dir, push.Stdin, push.Stdout, push.Stderr = m.Project, opts.Stdin, stderr, stderr
	if err := push.Run(); err != nil {
		_ = sb.Audit(sandbox.Event{Event: sandbox.EventFailed, Data: map[string]any{"push": err.Error(), "branch": name, "remote": remote}})
		return nil, fmt.Errorf("push: git push %s %s: %w (git printed why above)", remote, name, err)
	}
	res := &PushResult{Branch: name, Remote: remote, Commit: commit}
	msg, err := CommitMessage(sb, m, "")
	if err != nil {
		return nil, err
	}
	if m.Promotion != nil && m.Promotion.Branch == name {
		// The commit's own message, not one made again.
		if out, err := g.run(ctx, nil, "log", "-1", "--format=%B", commit); err == nil {
			subject, body, _ := strings.Cut(strings.TrimSpace(string(out)), "\n")
			msg = Message{Subject: strings.TrimSpace(subject), Body: strings.TrimSpace(body)}
		}
	}
	if _, err := exec.LookPath("gh"); err == nil {
		body := msg.Body
		if body == "" {
			body = msg.String()
		}
		body += receiptBlock(sb)
		// "--flag=value": a value starting with "-" stays a value.
		gh := exec.CommandContext(ctx, "gh", "pr", "create", "--head="+name, "--title="+msg.Subject, "--body="+body)
		var out strings.Builder
		gh.Dir, gh.Stdin, gh.Stdout, gh.Stderr = m.Project, opts.Stdin, &out, stderr
		if err := gh.Run(); err != nil {
			res.Hint = fmt.Sprintf("gh pr create failed (%v): open the pull request yourself. %s", err, compareHint(ctx, g, remote, name))
		} else {
			for _, l := range strings.Split(out.String(), "\n") {
				if l = strings.TrimSpace(l); strings.Contains(l, "://") {
					res.PullRequest = l
				}
			}
		}
	} else {
		res.Hint = "gh (GitHub's command line) is not installed, so no pull request was opened. " + compareHint(ctx, g, remote, name)
	}
	if err := sb.Audit(sandbox.Event{Event: sandbox.EventBranchPushed, Data: map[string]any{"branch": name, "remote": remote, "commit": commit, "pull_request": res.PullRequest}}); err != nil {
		return nil, err
	}
	_, err = sb.Update(func(m *sandbox.Meta) {
		if m.Promotion == nil || m.Promotion.Branch != name {
			m.Promotion = &sandbox.Promotion{Commit: commit, Branch: name, Time: sb.Store().Now().UTC()}
		}
		m.Promotion.Remote, m.Promotion.Pushed, m.Promotion.PullRequest = remote, sb.Store().Now().UTC(), res.PullRequest
	})
	return res, err
}

// lastBranch is the last branch apply --branch made of the sandbox
// (a later apply --commit on the current branch does not hide it), or "".
func lastBranch(sb *sandbox.Sandbox, m sandbox.Meta) string {
	if m.Promotion != nil && m.Promotion.NewBranch {
		return m.Promotion.Branch
	}
	evs, _ := sb.ReadAudit()
	for _, ev := range slices.Backward(evs) {
		if d, ok := ev.Data.(map[string]any); ok && ev.Event == sandbox.EventCommitted && d["new_branch"] == true {
			if b, ok := d["branch"].(string); ok {
				return b
			}
		}
	}
	return ""
}

// githubRemote reads owner/name from a GitHub remote URL.
var githubRemote = regexp.MustCompile(`github\.com[:/]([^/]+/[^/]+?)(?:\.git)?/?$`)

// compareHint says where to open a pull request for branch.
func compareHint(ctx context.Context, g *gitRepo, remote, branch string) string {
	url, _ := g.line(ctx, "remote", "get-url", remote)
	if m := githubRemote.FindStringSubmatch(url); m != nil {
		return fmt.Sprintf("Open it at https://github.com/%s/compare/%s?expand=1", m[1], branch)
	}
	return fmt.Sprintf("Open a pull request (or merge request) for branch %s on %s.", branch, remote)
}
