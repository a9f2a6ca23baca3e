// Package review owns what happens between "the agent is done" and "the
// user's project has changed": the Changeset model (per file status, modes,
// binary flag, rename source, hunks with context and stats, and the flags
// of what deserves a reviewer's second look), the user's
// Decisions (approve or reject per file and per hunk, with comments), the
// content a partially approved file resolves to, a git-apply compatible
// patch of the approved set, a line-based three-way merge, and Apply with its
// journal, backups, Undo and crash Recover, all or nothing if asked, taking
// the user's resolutions of conflicts (mine, theirs, both, given content).
//
// Every path and every byte in a Changeset came from the guest and is
// treated as hostile: paths are validated before the file system is
// touched, writes never leave the project root nor pass through a symbolic
// link, special mode bits are dropped and no device files are created.
//
// review imports sync/manifest for its types only. It must not import vm,
// guest, app, sync/transfer or fyne: the GUI and the CLI drive it, never the
// other way round.
package review
