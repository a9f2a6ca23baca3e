package review

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
	return atomicfile.WriteFile(filepath.Join(js.dir, journalFile), data, 0o600)
}

func (js journalStore) setState(j *Journal, s JournalState) error {
	j.State = s
	if err := js.write(j); err != nil {
		return fmt.Errorf("journal %s: %w", js.dir, err)
	}
	return nil
}

// put stores data under its SHA-256, durably.
func (js journalStore) put(data []byte) (string, error) {
	sum := sha256Hex(data)
	dir := filepath.Join(js.dir, "objects")
	if _, err := os.Stat(filepath.Join(dir, sum)); err == nil {
		return sum, nil
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", err
	}
	return sum, atomicfile.WriteFile(filepath.Join(dir, sum), data, 0o600)
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
