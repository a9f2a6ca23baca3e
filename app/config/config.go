// Package config reads Airlock's TOML configuration: a project's
// airlock.toml (what a project carries with it: extra excludes, narrower
// limits, network rules, the [environment] table that app/envspec
// validates and interprets), the user's own config.toml ([limits], open
// network, network allow-list, secrets and where their values live), and
// the trust store that remembers which project files the user confirmed.
// It merges them with the command line into the limits of one run
// (Resolve) and into an egress policy (Policy). A cloned repository is
// untrusted input, so a project file may only narrow what the user allows
// unless the user confirmed that exact file (by its SHA-256).
//
// It is plain data: it must not import vm, guest, review, sync or fyne,
// nor any app package but app/egress (for its rule syntax and Policy).
package config

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/BurntSushi/toml"
)

// FileName is the project configuration file, at the project's root.
const FileName = "airlock.toml"

// maxFileSize caps what Load reads: a configuration file is small.
const maxFileSize = 1 << 20

// Project is airlock.toml. The zero value is a project without one.
type Project struct {
	// Exclude lists extra patterns in .gitignore syntax, relative to the
	// project root, that are never copied into a sandbox (and are reported
	// like every other exclusion).
	Exclude []string `toml:"exclude"`
	// Limits may narrow the user's limits for this project; what they ask
	// beyond the user's is ignored (see Resolve).
	Limits Limits `toml:"limits"`
	// OpenNetwork is the project asking for an open network. A project
	// file cannot grant it: Resolve ignores it, with a note, unless the
	// user confirms (Sources.ConfirmWiden).
	OpenNetwork bool `toml:"open_network"`

	// Verify is a shell command run in the VM after the agent (e.g.
	// "go test ./..."); its output and exit status are part of the review.
	Verify string `toml:"verify"`

	// Network narrows (deny) or asks to widen (allow, host, secret) the
	// user's network policy. Widening needs the user's confirmation.
	Network Network `toml:"network"`

	// Environment is the [environment] table as written, nil without one.
	// This package only decodes it (unknown keys are errors like
	// everywhere else); app/envspec validates it and turns it into the
	// project's environment.
	Environment *Environment `toml:"environment"`

	// SHA256 is the hash of the file as read (empty without a file): a
	// confirmation is for these exact bytes.
	SHA256 string `toml:"-"`
}

// Environment is airlock.toml's [environment] table: the project's own
// environment, as written. app/envspec validates it.
type Environment struct {
	// Image is an OCI image reference; empty (and no Dockerfile) means
	// Airlock's agent image.
	Image string `toml:"image"`
	// Dockerfile, instead of Image, builds the image from a Dockerfile of
	// the project (a path relative to the project), in a builder VM.
	Dockerfile string `toml:"dockerfile"`
	// Context is the Dockerfile build's context, relative to the project;
	// empty means the project itself.
	Context string `toml:"context"`
	// Args are the Dockerfile build's arguments.
	Args map[string]string `toml:"args"`
	// Target is the Dockerfile stage to build; empty means the last.
	Target string `toml:"target"`
	// Docker asks for Docker inside the VM (never the host's).
	Docker bool `toml:"docker"`
	// Apt lists Debian packages to install, in order.
	Apt []string `toml:"apt"`
	// Setup lists shell commands run once, in order, when the
	// environment is built.
	Setup []string `toml:"setup"`
	// Env is set in the environment's processes.
	Env map[string]string `toml:"env"`
	// User is the user the agent runs as.
	User string `toml:"user"`
	// Hosts are the egress allow patterns the setup needs.
	Hosts []string `toml:"hosts"`
}

// EnvironmentKeys are the keys of [environment], for messages.
const EnvironmentKeys = "image, dockerfile, context, args, target, docker, apt, setup, env, user, hosts"

// Load reads dir/airlock.toml. A missing file is the zero Project.
// Unknown keys are errors, so a typo does not silently do nothing.
func Load(dir string) (Project, error) {
	path := filepath.Join(dir, FileName)
	data, err := readSmall(path)
	if errors.Is(err, fs.ErrNotExist) {
		return Project{}, nil
	}
	if err != nil {
		return Project{}, fmt.Errorf("read %s: %w", path, err)
	}
	p, err := Parse(data)
	if err != nil {
		return Project{}, fmt.Errorf("%s: %w", path, err)
	}
	return p, nil
}

// Parse decodes and validates the content of an airlock.toml, for a
// caller that read the file itself (app/envspec, which refuses links
// out of the project). Its errors do not name the file.
func Parse(data []byte) (Project, error) {
	var p Project
	if err := decodeStrict(data, &p, "exclude, open_network, verify, [limits] "+limitKeys()+", [network], [environment] "+EnvironmentKeys); err != nil {
		return Project{}, err
	}
	sum := sha256.Sum256(data)
	p.SHA256 = hex.EncodeToString(sum[:])
	if err := p.Validate(); err != nil {
		return Project{}, err
	}
	return p, nil
}

// decodeStrict decodes TOML into v; unknown keys are errors.
func decodeStrict(data []byte, v any, known string) error {
	md, err := toml.NewDecoder(bytes.NewReader(data)).Decode(v)
	if err != nil {
		return err
	}
	if undec := md.Undecoded(); len(undec) > 0 {
		keys := make([]string, len(undec))
		for i, k := range undec {
			keys[i] = k.String()
		}
		return fmt.Errorf("unknown keys %s (known: %s)", strings.Join(keys, ", "), known)
	}
	return nil
}

// Validate reports every problem at once.
func (p Project) Validate() error {
	var errs []error
	for i, e := range p.Exclude {
		if strings.TrimSpace(e) == "" || strings.ContainsRune(e, 0) {
			errs = append(errs, fmt.Errorf("exclude %d (%q): want a non-empty .gitignore pattern", i+1, e))
		}
	}
	errs = append(errs, p.Limits.Validate())
	if err := p.Network.Validate(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

func readSmall(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxFileSize+1))
	if err != nil {
		return nil, err
	}
	if len(data) > maxFileSize {
		return nil, fmt.Errorf("over %d bytes; a configuration file is small", maxFileSize)
	}
	return data, nil
}
