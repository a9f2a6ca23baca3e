package review

import (
	"fmt"
	"io/fs"

	"github.com/airlock-dev/airlock/sync/manifest"
)

// Modes from the sandbox are hostile input like everything else it sends
// back, and the reviewer sees only what git can say: 100644 or 100755 for
// a file, nothing for a directory. So the guest's exact mode never lands
// in the project; the owner's execute bit is the only bit taken from it.
// What Apply writes (umask is the user's, read once per apply):
//
//	what the path becomes          | what is in the project now | applied mode
//	-------------------------------+----------------------------+----------------------------------------
//	file                           | nothing, or another type   | 0755 if the guest's owner may execute,
//	                               |                            | else 0644; then less the umask
//	file, owner-x as in baseline   | a file                     | the project's mode, unchanged
//	file, owner-x set by the agent | a file                     | the project's mode plus x wherever it
//	                               |                            | grants r, less the umask
//	file, owner-x cleared          | a file                     | the project's mode without any x
//	directory                      | nothing, or another type   | 0755 less the umask
//	directory                      | a directory                | the project's mode, unchanged: a
//	                               |                            | directory mode change is never applied
//	symbolic link                  | anything                   | (links have no mode of their own)
//
// Group and other write, setuid, setgid and sticky never come from the
// guest. What the guest asked for beyond this is flagged on the file
// (FlagMode) and shown in the patch, the stat and the review window.
const (
	fileMode = fs.FileMode(0o644)
	execMode = fs.FileMode(0o755)
	dirMode  = fs.FileMode(0o755)
)

// defaultUmask is assumed where the umask cannot be read.
const defaultUmask = fs.FileMode(0o022)

// appliedMode is the mode Apply writes for a path that becomes typ with the
// guest's mode guest, given what the baseline (base) and the project now
// (cur) hold there. See the table above.
func appliedMode(typ manifest.Type, guest fs.FileMode, base, cur EntryState, umask fs.FileMode) fs.FileMode {
	umask &= fs.ModePerm
	switch typ {
	case manifest.Symlink:
		return 0
	case manifest.Dir:
		if cur.Exists && cur.Type == manifest.Dir {
			return cur.Mode
		}
		return dirMode &^ umask
	}
	want := guest&0o100 != 0
	if !cur.Exists || cur.Type != manifest.File {
		if want {
			return execMode &^ umask
		}
		return fileMode &^ umask
	}
	if base.Exists && base.Type == manifest.File && (base.Mode&0o100 != 0) == want {
		return cur.Mode // the agent left the execute bit alone
	}
	switch have := cur.Mode&0o100 != 0; {
	case want == have:
		return cur.Mode
	case want:
		return cur.Mode | ((cur.Mode&0o444)>>2)&^umask | 0o100
	}
	return cur.Mode &^ 0o111
}

// modeNote says, for a reviewer, what of f's mode a git patch cannot show
// and what Apply does with it instead; "" when git shows it all. It
// assumes the project still holds the baseline and leaves the umask out.
func modeNote(f *File) string {
	n := f.New
	if n == nil || n.Type == manifest.Symlink {
		return ""
	}
	var old EntryState
	if f.Old != nil && f.Old.Type == n.Type {
		old = EntryState{Exists: true, Type: f.Old.Type, Mode: f.Old.Mode}
	}
	applied := appliedMode(n.Type, n.Mode, old, old, 0)
	what := "mode"
	why := "only the owner's execute bit is taken"
	if n.Type == manifest.Dir {
		what = "directory mode"
		why = "Airlock never changes the mode of an existing directory"
	}
	if n.Type == manifest.Dir && !old.Exists {
		why = "new directories are created 0755"
	}
	switch {
	case applied == n.Mode:
		return ""
	case !old.Exists:
		return fmt.Sprintf("%s %04o from the sandbox, applied as %04o less your umask: %s", what, n.Mode, applied, why)
	case applied == old.Mode:
		return fmt.Sprintf("%s change %04o → %04o from the sandbox, not applied: %s", what, old.Mode, n.Mode, why)
	}
	return fmt.Sprintf("%s change %04o → %04o from the sandbox, applied as %04o: %s", what, old.Mode, n.Mode, applied, why)
}

// modeFlags flags what modeNote describes.
func modeFlags(f *File) []Flag {
	if note := modeNote(f); note != "" {
		return []Flag{{Kind: FlagMode, Reason: note}}
	}
	return nil
}
