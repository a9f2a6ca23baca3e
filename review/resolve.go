package review

import (
	"bytes"
	"fmt"

	"github.com/airlock-dev/airlock/sync/manifest"
)

// Choice is how the user resolves a file in conflict.
type Choice string

const (
	// KeepMine leaves the project's version exactly as it is.
	KeepMine Choice = "mine"
	// TakeTheirs writes the approved change over the project's version
	// (removing the file when the approved change removes it).
	TakeTheirs Choice = "theirs"
	// KeepBoth writes the three-way merge with both sides of each
	// conflicting stretch, the project's first (text files that both
	// sides changed only: ConflictError.Merge is set).
	KeepBoth Choice = "both"
	// UseContent writes Resolution.Content, a merge tool's result (see
	// ConflictError.Editable).
	UseContent Choice = "content"
)

// ParseChoice reads "mine", "theirs" or "both" as a person types them.
func ParseChoice(s string) (Choice, error) {
	switch c := Choice(s); c {
	case KeepMine, TakeTheirs, KeepBoth:
		return c, nil
	}
	return "", fmt.Errorf("%q is not a resolution: want mine (keep the project's version), theirs (take the approved change) or both (keep both sides of each conflicting stretch)", s)
}

// Resolution is the user's answer to one conflict, given to Apply in
// ApplyOptions.Resolutions under the conflict's Path.
type Resolution struct {
	Choice Choice `json:"choice"`
	// Content is what UseContent writes.
	Content []byte `json:"content,omitempty"`
	// Seen is what the project held at the path when the user chose (the
	// conflict's Project). If it holds something else by the time Apply
	// runs, the choice is not used: the file is reported as a conflict
	// again (Again set) with what it holds now. Nil takes the project as
	// it is at Apply (a choice made without looking, as airlock apply
	// --resolve does).
	Seen *EntryState `json:"seen,omitempty"`
}

// Choices are the resolutions that fit c, in the order to offer them:
// mine and theirs always, both when the file is text both sides changed,
// content (a merge tool's result) when the file is a regular file or
// absent on both sides.
func (c *ConflictError) Choices() []Choice {
	out := []Choice{KeepMine, TakeTheirs}
	if c.Merge != nil {
		out = append(out, KeepBoth)
	}
	if c.Editable() {
		out = append(out, UseContent)
	}
	return out
}

// Editable reports whether the file can be given content of the user's
// (a merge tool's result): neither side is a directory or a symbolic
// link.
func (c *ConflictError) Editable() bool {
	isFile := func(s EntryState) bool { return !s.Exists || s.Type == manifest.File }
	return isFile(c.Project) && isFile(c.Approved) && (c.Project.Exists || c.Approved.Exists)
}

// Resolved is what the file holds once r is applied: its content, and
// whether it exists at all (theirs of a change that removes it does not).
// It returns an error when r does not fit c (see Choices).
func (c *ConflictError) Resolved(r Resolution) (content []byte, exists bool, err error) {
	switch r.Choice {
	case KeepMine:
		return c.Ours, c.Project.Exists, nil
	case TakeTheirs:
		return c.Theirs, c.Approved.Exists, nil
	case KeepBoth:
		if c.Merge == nil {
			return nil, false, fmt.Errorf("%s: both sides can be kept only in a text file that both sides changed; choose mine or theirs", c.Path)
		}
		return c.Merge.BothSides(), true, nil
	case UseContent:
		if !c.Editable() {
			return nil, false, fmt.Errorf("%s: a merge tool's result fits a regular file only; choose mine or theirs", c.Path)
		}
		return r.Content, true, nil
	}
	return nil, false, fmt.Errorf("%s: %q is not a resolution", c.Path, r.Choice)
}

// BothSides renders the merge with both sides of each conflicting
// stretch, the project's ("ours") then the approved change's ("theirs"),
// and no markers. A side that ends without a newline gets one before the
// other side, so that no two lines are joined.
func (r *MergeResult) BothSides() []byte {
	var b bytes.Buffer
	for _, c := range r.Chunks {
		if !c.Conflict {
			b.Write(c.Content)
			continue
		}
		b.Write(c.Ours)
		if len(c.Ours) > 0 && c.Ours[len(c.Ours)-1] != '\n' && len(c.Theirs) > 0 {
			b.WriteByte('\n')
		}
		b.Write(c.Theirs)
	}
	return b.Bytes()
}

// resolve turns the conflict ce, which the user answered with r, into what
// the path is to hold: its state and content. cur is what the project
// holds, target what the approved change makes of it. A resolution that
// does not fit the conflict is the conflict again, saying why.
func (a *applier) resolve(ce *ConflictError, r Resolution, cur, target EntryState) (EntryState, []byte, error) {
	content, exists, err := ce.Resolved(r)
	if err != nil {
		ce.Reason = err.Error()
		return EntryState{}, nil, ce
	}
	switch {
	case r.Choice == KeepMine:
		return cur, content, nil
	case r.Choice == TakeTheirs:
		return target, content, nil
	case !exists:
		return EntryState{}, nil, nil
	}
	// A file of the user's content: the approved mode, or the project's,
	// or a new file's.
	mode := fileMode &^ a.umask
	switch {
	case target.Exists && target.Type == manifest.File:
		mode = target.Mode
	case cur.Exists && cur.Type == manifest.File:
		mode = cur.Mode
	}
	return EntryState{Exists: true, Type: manifest.File, Mode: mode, SHA256: sha256Hex(content)}, content, nil
}

// changedAgain is the conflict reported when the project no longer holds
// what the user saw when choosing how to resolve it: with what it holds
// now, so that the choice can be made again.
func (a *applier) changedAgain(f *File, out Outcome, baseData []byte, base, cur EntryState, curData []byte, target EntryState, theirs []byte) *ConflictError {
	ce := &ConflictError{Path: out.Path, File: f.Path, Base: baseData, Ours: curData, Theirs: theirs, Project: cur, Approved: target, Again: true,
		Reason: "it changed in the project again since you chose how to resolve it, so nothing was written there: look at it again and choose"}
	if textual(out, base, cur, baseData, curData, theirs) && cur.Exists {
		if m := Merge3(baseData, curData, theirs); !m.Clean() {
			ce.Merge = m
		}
	}
	return ce
}

// answered returns the path of outs the user resolved a conflict of, or "".
func answered(resolutions map[string]Resolution, outs []Outcome) string {
	for _, o := range outs {
		if _, ok := resolutions[o.Path]; ok {
			return o.Path
		}
	}
	return ""
}
