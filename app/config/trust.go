package config

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/airlock-dev/airlock/internal/atomicfile"
)

// Trust remembers which project files the user confirmed: a project's
// airlock.toml may widen what the user allows only when the user
// confirmed that exact file, by its SHA-256. Changing the file
// invalidates the confirmation.
type Trust struct {
	// Path is the trust store ($AIRLOCK_HOME/trust.json).
	Path string
}

type trustFile struct {
	Projects map[string]trustEntry `json:"projects"`
}

type trustEntry struct {
	SHA256    string    `json:"sha256"`
	Confirmed time.Time `json:"confirmed"`
}

func (t Trust) read() (trustFile, error) {
	var f trustFile
	data, err := os.ReadFile(t.Path)
	if errors.Is(err, fs.ErrNotExist) {
		return trustFile{Projects: map[string]trustEntry{}}, nil
	}
	if err != nil {
		return f, fmt.Errorf("read trust store: %w", err)
	}
	if err := json.Unmarshal(data, &f); err != nil {
		return f, fmt.Errorf("read trust store %s: %w", t.Path, err)
	}
	if f.Projects == nil {
		f.Projects = map[string]trustEntry{}
	}
	return f, nil
}

// Trusted reports whether the user confirmed the project directory's
// airlock.toml with this SHA-256.
func (t Trust) Trusted(project, sha string) (bool, error) {
	f, err := t.read()
	if err != nil {
		return false, err
	}
	e, ok := f.Projects[project]
	return ok && sha != "" && e.SHA256 == sha, nil
}

// Confirm records the user's confirmation of the project's airlock.toml
// with this SHA-256, replacing an earlier one.
func (t Trust) Confirm(project, sha string) error {
	f, err := t.read()
	if err != nil {
		return err
	}
	f.Projects[project] = trustEntry{SHA256: sha, Confirmed: time.Now().UTC()}
	data, err := json.MarshalIndent(f, "", "  ")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(t.Path), 0o700); err != nil {
		return fmt.Errorf("write trust store: %w", err)
	}
	if err := atomicfile.WriteFile(t.Path, append(data, '\n'), 0o600); err != nil {
		return fmt.Errorf("write trust store: %w", err)
	}
	return nil
}
