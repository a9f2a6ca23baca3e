package review

// How an apply stays all-or-nothing, with a few syncs in all rather than
// some per file (Apply; see also Recover and Undo):
//
//  1. Every object (each file's content before and after) goes to
//     objects/<sha256> in the journal directory, not synced.
//  2. One sync (syncBatch: syncfs(2) of each file system on Linux;
//     elsewhere fsync of every file and directory written, a few at a
//     time, then F_FULLFSYNC once per file system on macOS).
//  3. The commit record: journal.json, state Pending, written atomically
//     and durably. Before it the project is untouched and there is no
//     journal (objects left by a crash are written again, whole, by the
//     next put).
//  4. Every file the apply writes goes, whole and with its mode, to a
//     temporary file in the project (.airlock-*.tmp in its directory, or
//     in the nearest one above that stays), not synced.
//  5. One sync. A crash before it leaves temporary files and nothing
//     else: Recover removes them.
//  6. The steps, each an atomic rename, removal, chmod or link, none
//     synced: every path holds its old state or its new one, both on
//     disk already (staged files, objects).
//  7. One sync, then journal.json in state Applied, durably. A crash
//     between 3 and here: Recover rolls the apply forward from the
//     objects (or back), path by path, as each holds its old or new state.
//
// Undo and Recover change the project one durable step at a time
// (setState with no batch): they are rare, and each step keeps the same
// rule, a path old or new and the journal saying which way to go.

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/airlock-dev/airlock/internal/atomicfile"
)

// JournalState is where an apply stands.
type JournalState string

const (
	// Pending: the journal and backups are on disk, the project may be
	// partly changed. Recover finishes or rolls back.
	Pending JournalState = "pending"
	// Applied: every step is done. Undo reverts it.
	Applied JournalState = "applied"
	// Undoing: an undo or roll back started. Recover finishes it.
	Undoing JournalState = "undoing"
	// Undone: the project is back to what it was before the apply.
	Undone JournalState = "undone"
)

// Step is one change of one path: from Before to After.
type Step struct {
	Path   string     `json:"path"`
	Before EntryState `json:"before"`
	After  EntryState `json:"after"`
}

// Journal records an apply before it changes anything: the project, the
// steps in order, and (in the journal directory's objects/) the content of
// every file before and after, so that Undo restores the project byte for
// byte and Recover can finish or roll back an apply that crashed.
type Journal struct {
	Version int          `json:"version"`
	Project string       `json:"project"`
	State   JournalState `json:"state"`
	Created time.Time    `json:"created"`
	Steps   []Step       `json:"steps"`
}

const journalFile = "journal.json"

// ReadJournal reads the journal in dir.
func ReadJournal(dir string) (*Journal, error) {
	data, err := os.ReadFile(filepath.Join(dir, journalFile))
	if err != nil {
		return nil, fmt.Errorf("read journal: %w", err)
	}
	var j Journal
	if err := json.Unmarshal(data, &j); err != nil {
		return nil, fmt.Errorf("read journal %s: %w", dir, err)
	}
	if j.Version != 1 {
		return nil, fmt.Errorf("read journal %s: unknown version %d", dir, j.Version)
	}
	for _, s := range j.Steps {
		if err := ValidatePath(s.Path); err != nil {
			return nil, fmt.Errorf("read journal %s: %w", dir, err)
		}
	}
	return &j, nil
}

// journalStore is a journal directory: journal.json and objects/<sha256>.
type journalStore struct {
	dir string
}

func (js journalStore) write(j *Journal) error {
	data, err := json.MarshalIndent(j, "", "  ")
	if err != nil {
		return err
	}
	fsStep("journal")
	return atomicfile.WriteFile(filepath.Join(js.dir, journalFile), data, 0o600)
}

func (js journalStore) setState(j *Journal, s JournalState) error {
	j.State = s
	if err := js.write(j); err != nil {
		return fmt.Errorf("journal %s: %w", js.dir, err)
	}
	return nil
}

// put stores data under its SHA-256 sum, not synced: b records it. An
// object cut short by a crash is never read (the journal is Preparing
// until the batch is synced) and is written again whole by the next put.
func (js journalStore) put(sum string, data []byte, b *batch) error {
	dir := filepath.Join(js.dir, "objects")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	p := filepath.Join(dir, sum)
	fsStep("object")
	if err := os.WriteFile(p, data, 0o600); err != nil {
		return err
	}
	b.file(p)
	return nil
}

// get reads the object sum and checks its hash.
func (js journalStore) get(sum string) ([]byte, error) {
	if len(sum) != 64 {
		return nil, fmt.Errorf("bad object name %q", sum)
	}
	data, err := os.ReadFile(filepath.Join(js.dir, "objects", sum))
	if err != nil {
		return nil, fmt.Errorf("backup %s: %w", sum, err)
	}
	if sha256Hex(data) != sum {
		return nil, fmt.Errorf("backup %s is corrupt", sum)
	}
	return data, nil
}
