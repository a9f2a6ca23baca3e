package sandbox

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"time"
)

// Checkpoints of a sandbox whose VM is live (airlock run --keep):
// sandboxes/<id>/checkpoints/<name>/ holds the machine's saved state
// (state, and the hypervisor's description of it), a copy of the
// workspace disk taken while the machine was paused for the save
// (disk.img: reflinked where the file system can, else copied sparsely),
// the collected workspace manifest of that moment (guest.json, when the
// sandbox has one) and checkpoint.json. A rollback puts the disk and the
// manifest back and restores the machine from the state in a new
// supervisor, in place of the running one: processes, memory and files
// come back as they were.

// Files of a checkpoint directory.
const (
	CheckpointsDir  = "checkpoints"
	CheckpointFile  = "checkpoint.json"
	CheckpointState = "state"
	CheckpointLock  = "checkpoint.lock"
)

// Audit events of checkpoints.
const (
	EventCheckpoint EventKind = "checkpoint"
	EventRollback   EventKind = "rollback"
)

// ErrNoVM means the sandbox's VM is not running: checkpoints need a live
// one (airlock run --keep).
var ErrNoVM = errors.New("the sandbox's VM is not running")

// Checkpoint describes one saved checkpoint.
type Checkpoint struct {
	Name    string    `json:"name"`
	Created time.Time `json:"created"`
	// SaveMS is how long the machine was paused: the state saved and the
	// disk copied.
	SaveMS int64 `json:"save_ms"`
	// StateBytes is the host space the saved state takes (with the RAM
	// file beside it, for QEMU); DiskBytes the host space the
	// disk copy takes (a reflinked copy shares it with the disk).
	StateBytes int64 `json:"state_bytes"`
	DiskBytes  int64 `json:"disk_bytes"`
	Reflinked  bool  `json:"reflinked"`
	Manifest   bool  `json:"manifest"`
}

// RunDir is the run directory of the sandbox's VM, where its supervisor
// serves (run/<id> in the home).
func (sb *Sandbox) RunDir() string {
	return sb.store.home.Run(sb.ID)
}

// ValidCheckpointName accepts one plain path element of letters, digits,
// '-', '_' and '.', not starting with '.' or '-'.
func ValidCheckpointName(name string) error {
	if name == "" || len(name) > 64 {
		return fmt.Errorf("checkpoint name %q: 1 to 64 characters", name)
	}
	for i, r := range name {
		ok := r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' || r == '.'
		if !ok || i == 0 && (r == '.' || r == '-') {
			return fmt.Errorf("checkpoint name %q: use letters, digits, '-', '_' and '.', not starting with '.' or '-'", name)
		}
	}
	return nil
}

// Checkpoints lists the sandbox's checkpoints, oldest first.
func (sb *Sandbox) Checkpoints() ([]Checkpoint, error) {
	des, err := os.ReadDir(sb.Path(CheckpointsDir))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []Checkpoint
	for _, de := range des {
		if !de.IsDir() || ValidCheckpointName(de.Name()) != nil {
			continue
		}
		b, err := os.ReadFile(sb.Path(filepath.Join(CheckpointsDir, de.Name(), CheckpointFile)))
		if err != nil {
			continue
		}
		var cp Checkpoint
		if json.Unmarshal(b, &cp) != nil || cp.Name != de.Name() {
			continue
		}
		out = append(out, cp)
	}
	slices.SortFunc(out, func(a, b Checkpoint) int { return a.Created.Compare(b.Created) })
	return out, nil
}
