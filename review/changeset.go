package review

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io/fs"
	"sort"

	"github.com/airlock-dev/airlock/internal/safetext"
	"github.com/airlock-dev/airlock/review/semantic"
	"github.com/airlock-dev/airlock/sync/manifest"
)

// Status is what happened to one path.
type Status string

const (
	Added       Status = "added"
	Modified    Status = "modified"
	Deleted     Status = "deleted"
	Renamed     Status = "renamed"
	ModeChanged Status = "mode-changed"
	TypeChanged Status = "type-changed"
)

// Source returns the bytes whose SHA-256 is sum (lower-case hex), usually
// from the content store. Bytes that do not hash to sum are refused.
type Source func(sum string) ([]byte, error)

// Options tunes how a Changeset is built. The zero value is ready to use.
type Options struct {
	// ContextLines is the number of unchanged lines around each change in
	// a hunk: 0 means 3, as git; a negative value means none.
	ContextLines int
	// MaxTextSize is the size above which a file is not diffed line by
	// line and is treated like a binary file: 0 means 8 MiB.
	MaxTextSize int64
	// HostExec adds patterns to the built-in list of files that run on
	// the user's machine (see hostexec.go); a change to a matching path
	// is flagged FlagHostExec. The built-in list always applies.
	HostExec []string
}

func (o Options) context() int {
	switch {
	case o.ContextLines == 0:
		return 3
	case o.ContextLines < 0:
		return 0
	}
	return o.ContextLines
}

func (o Options) maxText() int64 {
	if o.MaxTextSize <= 0 {
		return 8 << 20
	}
	return o.MaxTextSize
}

// Side is one side of a file change: what the path held before (Old) or
// after (New) the agent's run.
type Side struct {
	Type manifest.Type `json:"type"`
	// Mode holds permission bits only.
	Mode   fs.FileMode `json:"mode"`
	Size   int64       `json:"size,omitempty"`
	SHA256 string      `json:"sha256,omitempty"`
	// Target is the link target (symlinks only).
	Target string `json:"target,omitempty"`
}

// File is the change of one path.
type File struct {
	// Path is where the file is after the change (where it was, for a
	// deletion). OldPath is the rename source, for Renamed.
	Path    string `json:"path"`
	OldPath string `json:"old_path,omitempty"`
	Status  Status `json:"status"`
	// Old is nil for Added, New is nil for Deleted.
	Old *Side `json:"old,omitempty"`
	New *Side `json:"new,omitempty"`
	// Binary is set when either side is not shown as text: a NUL byte or
	// invalid UTF-8 (see looksBinary), or larger than Options.MaxTextSize
	// (TooLarge is then set too). A binary file has no hunks.
	Binary   bool `json:"binary,omitempty"`
	TooLarge bool `json:"too_large,omitempty"`
	// Hunks turn the old content into the new one. Symbolic links are
	// diffed by their targets, as git does.
	Hunks []Hunk `json:"hunks,omitempty"`
	// Added and Removed count lines over all hunks.
	Added   int `json:"added"`
	Removed int `json:"removed"`
	// Flags are what deserves a reviewer's second look at this change,
	// each with the reason in words.
	Flags []Flag `json:"flags,omitempty"`
	// Semantic is what the change means (declarations added, removed,
	// renamed, changed), set by Changeset.Summarize; nil for a file in no
	// language it reads.
	Semantic *semantic.Summary `json:"semantic,omitempty"`

	oldData, newData []byte
}

// FlagKind names a reason to look twice at a change.
type FlagKind string

const (
	// FlagControl: the content or the name holds terminal control or
	// Unicode bidi/invisible format characters, which could make what is
	// shown differ from what is applied (they are shown as visible
	// escapes).
	FlagControl FlagKind = "control-characters"
	// FlagHostExec: the file runs on the user's machine later (git
	// hooks, .envrc, editor tasks, build and package scripts, CI
	// workflows, a script made executable).
	FlagHostExec FlagKind = "runs-on-host"
	// FlagMode: a mode change git cannot express (a directory's mode,
	// bits beyond the owner's execute bit), shown in words.
	FlagMode FlagKind = "mode"
)

// ControlReason is the reason of a FlagControl flag.
const ControlReason = "contains control or bidi characters"

// Flag is one reason to look twice at a change.
type Flag struct {
	Kind FlagKind `json:"kind"`
	// Reason says why, for a reviewer ("runs on your machine: git hook"):
	// one line, any name from the guest in it quoted when odd.
	Reason string `json:"reason"`
	// Added, Removed and Changed are the dependency names a
	// FlagDependency flag found added, removed, or given another version
	// (at most 500 each, sorted; none when the file could not be read).
	Added   []string `json:"added,omitempty"`
	Removed []string `json:"removed,omitempty"`
	Changed []string `json:"changed,omitempty"`
	// Lines are the line numbers the flag is about: in the new content,
	// or in the old one for a large deletion.
	Lines []int `json:"lines,omitempty"`
}

// HasFlag reports whether f carries a flag of kind k.
func (f *File) HasFlag(k FlagKind) bool { return f.FlagReason(k) != "" }

// FlagReason is the reason f carries a flag of kind k, or "".
func (f *File) FlagReason(k FlagKind) string {
	for _, fl := range f.Flags {
		if fl.Kind == k {
			return fl.Reason
		}
	}
	return ""
}

// IsSymlink reports whether either side is a symbolic link.
func (f *File) IsSymlink() bool {
	return (f.Old != nil && f.Old.Type == manifest.Symlink) || (f.New != nil && f.New.Type == manifest.Symlink)
}

// IsDir reports whether the change is about a directory.
func (f *File) IsDir() bool {
	return (f.Old != nil && f.Old.Type == manifest.Dir) || (f.New != nil && f.New.Type == manifest.Dir)
}

// HunkSelectable reports whether hunks of this file can be approved one by
// one: a text file whose content changed and stays a regular file. Every
// other change is taken or left whole.
func (f *File) HunkSelectable() bool {
	return f.Status == Modified && !f.Binary && len(f.Hunks) > 0 &&
		f.Old.Type == manifest.File && f.New.Type == manifest.File
}

// OldContent and NewContent return the bytes of each side (the link target
// for a symbolic link, nil for a missing side or a directory).
func (f *File) OldContent() []byte { return f.oldData }
func (f *File) NewContent() []byte { return f.newData }

// Changeset is every change of one run, sorted by path.
type Changeset struct {
	Files []*File `json:"files"`
}

// File returns the change of path, or nil.
func (cs *Changeset) File(path string) *File {
	for _, f := range cs.Files {
		if f.Path == path {
			return f
		}
	}
	return nil
}

// Stats sums the lines added and removed over all files.
func (cs *Changeset) Stats() (added, removed int) {
	for _, f := range cs.Files {
		added += f.Added
		removed += f.Removed
	}
	return added, removed
}

// New builds a Changeset from manifest changes, reading old and new
// contents from src. Every path is validated; content that does not match
// its recorded SHA-256 is refused.
func New(ctx context.Context, changes []manifest.Change, src Source, opts Options) (*Changeset, error) {
	cs := &Changeset{}
	seen := map[string]bool{}
	for _, c := range changes {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		f, err := newFile(c, src, opts)
		if err != nil {
			return nil, fmt.Errorf("changeset %s: %w", c.Path, err)
		}
		if seen[f.Path] {
			return nil, fmt.Errorf("changeset %s: %w", c.Path, &PathError{Path: f.Path, Reason: "appears twice in the changes"})
		}
		seen[f.Path] = true
		cs.Files = append(cs.Files, f)
	}
	for _, f := range cs.Files {
		if f.OldPath != "" && seen[f.OldPath] {
			return nil, fmt.Errorf("changeset %s: %w", f.Path, &PathError{Path: f.OldPath, Reason: "is both a rename source and changed itself"})
		}
		if f.OldPath != "" {
			seen[f.OldPath] = true
		}
	}
	sort.Slice(cs.Files, func(i, j int) bool { return cs.Files[i].Path < cs.Files[j].Path })
	return cs, nil
}

func sideOf(e *manifest.Entry) (*Side, error) {
	if e == nil {
		return nil, nil
	}
	switch e.Type {
	case manifest.File, manifest.Dir, manifest.Symlink:
	default:
		return nil, fmt.Errorf("entry type %q is not a file, directory or symlink", e.Type)
	}
	if e.Type == manifest.File && len(e.SHA256) != 64 {
		return nil, fmt.Errorf("file entry has no valid sha256")
	}
	return &Side{Type: e.Type, Mode: e.Mode.Perm(), Size: e.Size, SHA256: e.SHA256, Target: e.Target}, nil
}

func newFile(c manifest.Change, src Source, opts Options) (*File, error) {
	if err := ValidatePath(c.Path); err != nil {
		return nil, err
	}
	f := &File{Path: c.Path, Status: Status(c.Kind)}
	var err error
	if f.Old, err = sideOf(c.Old); err != nil {
		return nil, err
	}
	if f.New, err = sideOf(c.New); err != nil {
		return nil, err
	}
	switch c.Kind {
	case manifest.Added:
		if f.New == nil || f.Old != nil {
			return nil, fmt.Errorf("added change needs only a new entry")
		}
	case manifest.Deleted:
		if f.Old == nil || f.New != nil {
			return nil, fmt.Errorf("deleted change needs only an old entry")
		}
	case manifest.Renamed:
		if err := ValidatePath(c.OldPath); err != nil {
			return nil, err
		}
		if c.OldPath == c.Path {
			return nil, fmt.Errorf("rename to itself")
		}
		f.OldPath = c.OldPath
		fallthrough
	case manifest.Modified, manifest.ModeChanged, manifest.TypeChanged:
		if f.Old == nil || f.New == nil {
			return nil, fmt.Errorf("%s change needs an old and a new entry", c.Kind)
		}
	default:
		return nil, fmt.Errorf("unknown change kind %q", c.Kind)
	}
	if f.oldData, err = content(f.Old, src); err != nil {
		return nil, fmt.Errorf("old content: %w", err)
	}
	if f.newData, err = content(f.New, src); err != nil {
		return nil, fmt.Errorf("new content: %w", err)
	}
	defer flagControl(f)
	defer func() { f.Flags = append(f.Flags, secondLook(f)...) }()
	if fl, ok := hostExecFlag(f, opts.HostExec); ok {
		f.Flags = append(f.Flags, fl)
	}
	f.Flags = append(f.Flags, modeFlags(f)...)
	if f.IsDir() && f.TypeChange() == "" {
		return f, nil
	}
	limit := opts.maxText()
	if int64(len(f.oldData)) > limit || int64(len(f.newData)) > limit {
		f.Binary, f.TooLarge = true, true
	} else if looksBinary(f.oldData) || looksBinary(f.newData) {
		f.Binary = true
	}
	if f.Binary {
		return f, nil
	}
	if f.Old != nil && f.New != nil && f.Old.Type != f.New.Type {
		// A type change is a deletion and an addition; its hunks would mix
		// a file's content with a link target.
		return f, nil
	}
	f.Hunks = buildHunks(splitLines(f.oldData), splitLines(f.newData), opts.context())
	for _, h := range f.Hunks {
		f.Added += h.Added
		f.Removed += h.Removed
	}
	return f, nil
}

// flagControl flags f with FlagControl when what a reviewer is shown of
// it holds control or bidi characters (safetext.Suspicious): its path,
// rename source or link targets, the lines of its hunks, or, for a text
// file without hunks (a type change), either side's content. A file shown
// as binary shows no content, and what the change leaves untouched is not
// shown either.
func flagControl(f *File) {
	suspicious := safetext.Suspicious(f.Path) || safetext.Suspicious(f.OldPath)
	for _, s := range []*Side{f.Old, f.New} {
		if s != nil && safetext.Suspicious(s.Target) {
			suspicious = true
		}
	}
	for _, h := range f.Hunks {
		for _, l := range h.Lines {
			if suspicious {
				break
			}
			suspicious = safetext.Suspicious(l.bytes())
		}
	}
	if !suspicious && !f.Binary && len(f.Hunks) == 0 && f.Old != nil && f.New != nil && f.Old.Type != f.New.Type {
		suspicious = safetext.SuspiciousBytes(f.oldData) || safetext.SuspiciousBytes(f.newData)
	}
	if suspicious && !f.HasFlag(FlagControl) {
		f.Flags = append(f.Flags, Flag{Kind: FlagControl, Reason: ControlReason})
	}
}

// content returns a side's bytes: the verified file content, or the link
// target of a symbolic link.
func content(s *Side, src Source) ([]byte, error) {
	if s == nil {
		return nil, nil
	}
	switch s.Type {
	case manifest.Symlink:
		return []byte(s.Target), nil
	case manifest.Dir:
		return nil, nil
	}
	if src == nil {
		return nil, fmt.Errorf("no content source")
	}
	data, err := src(s.SHA256)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", s.SHA256, err)
	}
	if got := sha256Hex(data); got != s.SHA256 {
		return nil, fmt.Errorf("content store returned bytes with sha256 %s for %s", got, s.SHA256)
	}
	return data, nil
}

func sha256Hex(data []byte) string {
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:])
}
