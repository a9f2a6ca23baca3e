package review

// How an apply stays all-or-nothing, with a few syncs in all rather than
// some per file (Apply; see also Recover and Undo):
//
//  1. Every object (each file's content before and after) goes to one
//     file in the journal directory, objects.pack, not synced.
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
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
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
// steps in order, and (in the journal directory's objects.pack) the
// content of every file before and after, so that Undo restores the
// project byte for byte and Recover can finish or roll back an apply that
// crashed.
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

// journalStore is a journal directory: journal.json, and the objects in
// objects.pack (older journals: one file each, objects/<sha256>).
type journalStore struct {
	dir string
	// pack caches where each object of objects.pack is; nil reads the
	// pack's headers again for each object.
	pack *packIndex
}

func newJournalStore(dir string) journalStore {
	return journalStore{dir: dir, pack: &packIndex{}}
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

const packFile = "objects.pack"

// putAll writes objects (by SHA-256) to objects.pack in one go, not
// synced: b records it. Each is a line "<sha256> <size>" and its bytes.
// A pack cut short by a crash is never read (the journal is written after
// the pack is synced) and is written again whole by the next putAll.
func (js journalStore) putAll(objects map[string][]byte, b *batch) error {
	p := filepath.Join(js.dir, packFile)
	fsStep("objects")
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	w := bufio.NewWriterSize(f, 1<<20)
	for sum, data := range objects {
		fmt.Fprintf(w, "%s %d\n", sum, len(data))
		w.Write(data)
	}
	err = w.Flush()
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	b.file(p)
	return nil
}

// packIndex is where each object of a pack is: offset and size.
type packIndex struct {
	once sync.Once
	at   map[string][2]int64
	err  error
}

// index reads the headers of objects.pack; a journal without one has an
// empty index.
func (js journalStore) index() (map[string][2]int64, error) {
	read := func() (map[string][2]int64, error) {
		f, err := os.Open(filepath.Join(js.dir, packFile))
		if errors.Is(err, fs.ErrNotExist) {
			return nil, nil
		}
		if err != nil {
			return nil, err
		}
		defer f.Close()
		at := map[string][2]int64{}
		r := bufio.NewReader(f)
		off := int64(0)
		for {
			line, err := r.ReadString('\n')
			if err == io.EOF && line == "" {
				return at, nil
			}
			if err != nil {
				return nil, fmt.Errorf("%s: %w", packFile, err)
			}
			var sum string
			var size int64
			if _, err := fmt.Sscanf(line, "%64s %d\n", &sum, &size); err != nil || size < 0 {
				return nil, fmt.Errorf("%s: bad header at %d", packFile, off)
			}
			off += int64(len(line))
			at[sum] = [2]int64{off, size}
			if _, err := r.Discard(int(size)); err != nil {
				return nil, fmt.Errorf("%s: object %s cut short", packFile, sum)
			}
			off += size
		}
	}
	if js.pack == nil {
		return read()
	}
	js.pack.once.Do(func() { js.pack.at, js.pack.err = read() })
	return js.pack.at, js.pack.err
}

// get reads the object sum and checks its hash.
func (js journalStore) get(sum string) ([]byte, error) {
	if len(sum) != 64 {
		return nil, fmt.Errorf("bad object name %q", sum)
	}
	at, err := js.index()
	if err != nil {
		return nil, fmt.Errorf("backup %s: %w", sum, err)
	}
	var data []byte
	if loc, ok := at[sum]; ok {
		data, err = readAt(filepath.Join(js.dir, packFile), loc[0], loc[1])
	} else {
		data, err = os.ReadFile(filepath.Join(js.dir, "objects", sum))
	}
	if err != nil {
		return nil, fmt.Errorf("backup %s: %w", sum, err)
	}
	if sha256Hex(data) != sum {
		return nil, fmt.Errorf("backup %s is corrupt", sum)
	}
	return data, nil
}

func readAt(p string, off, size int64) ([]byte, error) {
	f, err := os.Open(p)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data := make([]byte, size)
	if _, err := f.ReadAt(data, off); err != nil {
		return nil, err
	}
	return data, nil
}
