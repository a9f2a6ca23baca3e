package gui

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"slices"

	"github.com/airlock-dev/airlock/internal/atomicfile"
)

// PrefsFile is the file in the Airlock home where the app keeps the
// run dialog's last choices and the recent projects.
const PrefsFile = "app.json"

// maxRecent is how many recent projects are kept.
const maxRecent = 8

// Prefs are the app's remembered choices: the run dialog's last agent,
// image and limits ("" or zero: as in settings), and the projects runs
// were started on, the latest first.
type Prefs struct {
	Agent     string   `json:"agent,omitempty"`
	Image     string   `json:"image,omitempty"`
	CPUs      int      `json:"cpus,omitempty"`
	MemoryMiB int      `json:"memory_mib,omitempty"`
	Timeout   string   `json:"timeout,omitempty"`
	Recent    []string `json:"recent,omitempty"`
}

// loadPrefs reads the prefs at path; a missing file (or no path) is the
// zero Prefs.
func loadPrefs(path string) (Prefs, error) {
	var p Prefs
	if path == "" {
		return p, nil
	}
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return p, nil
	}
	if err != nil {
		return p, fmt.Errorf("read the app's choices: %w", err)
	}
	if err := json.Unmarshal(b, &p); err != nil {
		return Prefs{}, fmt.Errorf("read the app's choices (%s): %w", path, err)
	}
	return p, nil
}

// savePrefs replaces the prefs at path (nothing without a path).
func savePrefs(path string, p Prefs) error {
	if path == "" {
		return nil
	}
	b, err := json.MarshalIndent(p, "", "  ")
	if err != nil {
		return err
	}
	if err := atomicfile.WriteFile(path, append(b, '\n'), 0o600); err != nil {
		return fmt.Errorf("keep the app's choices: %w", err)
	}
	return nil
}

// addRecent puts project first in the recent projects.
func (p *Prefs) addRecent(project string) {
	p.Recent = slices.DeleteFunc(p.Recent, func(r string) bool { return r == project })
	p.Recent = append([]string{project}, p.Recent...)
	if len(p.Recent) > maxRecent {
		p.Recent = p.Recent[:maxRecent]
	}
}
