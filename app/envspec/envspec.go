// Package envspec finds and validates a project's own environment: the
// image its sandboxes start from, the Debian packages and setup commands
// that are installed on top of it, its environment variables and user.
// The description comes from airlock.toml's [environment] table, else
// from .devcontainer/devcontainer.json or .devcontainer.json (the subset
// of the Dev Container format Airlock can honour; every other key is
// named in a warning); without either the project uses the agent image.
//
// A project is untrusted input: the files are read only inside the
// project directory (a link that leaves it is refused), capped in size,
// and every value is checked before anything is built from it.
//
// It is plain data, built before any VM: it must not import vm, guest,
// review, sync, app/machine/launch, app/pipeline, app/sandbox, app/machine/vmhost or
// fyne; it uses app/config to decode airlock.toml and app/egress for the
// syntax of host patterns.
package envspec

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"sort"
)

// Environment is a project's environment, validated.
type Environment struct {
	// Source is the file it came from, relative to the project, with
	// forward slashes: "airlock.toml", ".devcontainer/devcontainer.json"
	// or ".devcontainer.json".
	Source string
	// Image is the OCI image reference to start from, as written. Empty
	// (airlock.toml only) means the agent image.
	Image string
	// Apt lists Debian packages (name or name=version) installed before
	// the setup steps, in this order.
	Apt []string
	// Setup are the commands run once, in order, when the environment is
	// built.
	Setup []Step
	// Env is set in every process of the environment (setup and runs).
	Env map[string]string
	// User is the user commands run as; empty means the image's default.
	User string
	// Hosts are egress allow patterns (app/egress rule syntax) the setup
	// asks for, beyond what its package installs need.
	Hosts []string
	// WorkspaceFolder is where the project should appear in the guest
	// (devcontainer.json only); empty means Airlock's /workspace.
	WorkspaceFolder string
	// Warnings name what the description asks for that Airlock does not
	// do, one sentence each. They are for the person running: show them.
	Warnings []string
}

// Step is one setup command: either Shell (run by /bin/sh -c) or Argv
// (run directly, no shell), never both.
type Step struct {
	// Origin is the key the step came from: "setup", "onCreateCommand",
	// "postCreateCommand".
	Origin string
	// Name is the command's name in the object form of a devcontainer
	// lifecycle command; empty otherwise.
	Name string
	// Shell is a command line for /bin/sh -c.
	Shell string
	// Argv is a program and its arguments, run without a shell.
	Argv []string
}

// NeedsNetwork reports whether building the environment runs anything
// (packages to install, setup commands). Such a build reaches the
// network through the egress proxy, which widens what the project may
// do: it needs the user's confirmation (airlock trust).
func (e *Environment) NeedsNetwork() bool {
	return len(e.Apt) > 0 || len(e.Setup) > 0
}

// keyVersion changes when the key's encoding does, so an old cache entry
// is never taken for a new one.
const keyVersion = "airlock-environment-v1"

// Key is a stable SHA-256 (hex) of everything that determines the built
// environment: image, packages in their order, setup steps in their
// order, the environment variables (sorted by name) and the user. The
// same description gives the same key on every machine, whichever file
// it came from; any change gives another. Source, Hosts,
// WorkspaceFolder, Warnings and the steps' Name and Origin do not change
// what is built, so they are not part of it. Image is the reference as
// written: a builder that resolves a tag should add the digest it got to
// its own cache key.
func (e *Environment) Key() string {
	h := sha256.New()
	var w keyWriter
	w.str(keyVersion)
	w.str(e.Image)
	w.strs("apt", e.Apt)
	w.num(len(e.Setup))
	for _, s := range e.Setup {
		if s.Argv != nil {
			w.strs("argv", s.Argv)
		} else {
			w.str("shell")
			w.str(s.Shell)
		}
	}
	names := make([]string, 0, len(e.Env))
	for k := range e.Env {
		names = append(names, k)
	}
	sort.Strings(names)
	w.num(len(names))
	for _, k := range names {
		w.str(k)
		w.str(e.Env[k])
	}
	w.str(e.User)
	h.Write(w.buf)
	return hex.EncodeToString(h.Sum(nil))
}

// keyWriter is Key's encoding: every string and list is preceded by its
// length, so no two different descriptions encode alike (whatever bytes
// the strings hold).
type keyWriter struct{ buf []byte }

func (w *keyWriter) num(n int) { w.buf = binary.BigEndian.AppendUint64(w.buf, uint64(n)) }

func (w *keyWriter) str(s string) {
	w.num(len(s))
	w.buf = append(w.buf, s...)
}

func (w *keyWriter) strs(tag string, ss []string) {
	w.str(tag)
	w.num(len(ss))
	for _, s := range ss {
		w.str(s)
	}
}
