// Package envspec finds and validates a project's own environment: the
// image its sandboxes start from (pulled, or built from the project's
// Dockerfile), the Debian packages, Dev Container features and setup
// commands installed on top of it, its environment variables and user,
// whether it wants Docker inside the VM, and the Compose services that
// run beside it. The description comes from airlock.toml's [environment]
// table, else from .devcontainer/devcontainer.json or .devcontainer.json
// (with the Compose files it names, read by compose-go); whatever Airlock
// does not do as asked is named in a warning; without either the project
// uses the agent image.
//
// A project is untrusted input: the files are read only inside the
// project directory (a link that leaves it is refused), capped in size,
// every path a description names must stay inside the project, nothing
// is fetched or run, and every value is checked before anything is built
// from it. The host's environment never enters a description.
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
	"encoding/json"
	"slices"
	"sort"
	"time"
)

// Environment is a project's environment, validated.
type Environment struct {
	// Source is the file it came from, relative to the project, with
	// forward slashes: "airlock.toml", ".devcontainer/devcontainer.json"
	// or ".devcontainer.json".
	Source string
	// Image is the OCI image reference to start from, as written. Empty
	// with no Build means the agent image (airlock.toml only).
	Image string
	// Build, when set, is the Dockerfile the environment's image is built
	// from (in a builder VM); Image is then empty.
	Build *Build
	// Compose, when set, is the Compose setup: the environment is its dev
	// service's (Image or Build, and its variables are in Env), and the
	// services it runs beside the agent are Compose.Services.
	Compose *Compose
	// Features are the Dev Container features asked for, in ID order,
	// supported or not.
	Features []Feature
	// Docker asks for Docker inside the VM (airlock run --docker, docker =
	// true, the docker-in-docker or docker-outside-of-docker feature, or a
	// bind of the Docker socket). Never the host's Docker.
	Docker bool
	// RunArgs are devcontainer.json's runArgs, each classified.
	RunArgs []RunArg
	// Apt lists Debian packages (name or name=version) installed before
	// the setup steps, in this order.
	Apt []string
	// Setup are the commands run once, in order, when the environment is
	// built.
	Setup []Step
	// Start are the commands run in every sandbox, in order, before the
	// command of each run and each reply round (postStartCommand, then
	// postAttachCommand): as the environment's user in /workspace with
	// its variables, in the agent's jail. They are not part of Key.
	Start []Step
	// AddHosts are the /etc/hosts entries written in every sandbox as it
	// starts (runArgs --add-host). They are not part of Key.
	AddHosts []HostEntry
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
	// do as asked, one sentence each. They are for the person running:
	// show them.
	Warnings []Warning
}

// Warning is one thing a description asks for that Airlock does not do
// as asked.
type Warning struct {
	// Key is where it is asked for: a devcontainer.json key
	// ("features", "runArgs[2]"), or a Compose file's
	// ("compose services.db.volumes[1]").
	Key string
	// Text is the sentence for people: what is asked, and what happens
	// instead.
	Text string
	// Moot says a sandbox does not miss it: it has no meaning or is not
	// needed in a VM (editor settings, ports forwarded to the host,
	// container privileges, a named volume). A warning that is not moot
	// names something the sandbox will lack.
	Moot bool
}

func (w Warning) String() string { return w.Text }

// AsWritten reports whether Airlock gives the environment everything it
// asks for: every warning is moot.
func (e *Environment) AsWritten() bool {
	for _, w := range e.Warnings {
		if !w.Moot {
			return false
		}
	}
	return true
}

// Build is the Dockerfile form: the image is built from a Dockerfile in a
// builder VM, its context limited to the project.
type Build struct {
	// Dockerfile is the Dockerfile's path relative to the project,
	// slash-separated and clean; it never leaves the project. Empty when
	// the Compose file holds the Dockerfile (Inline).
	Dockerfile string `json:"dockerfile"`
	// Inline is the Dockerfile itself when a Compose service gives it as
	// dockerfile_inline; InlineIn says where, for people.
	Inline   string `json:"inline,omitempty"`
	InlineIn string `json:"inline_in,omitempty"`
	// Context is the build context's directory relative to the project
	// ("." is the project itself); it never leaves the project.
	Context string `json:"context"`
	// Args are the build arguments (ARG values).
	Args map[string]string `json:"args,omitempty"`
	// Target is the stage to build; empty means the last.
	Target string `json:"target,omitempty"`
	// Sum is the Dockerfile's SHA-256 (hex): part of the environment's
	// key, so a changed Dockerfile is built, and confirmed, again.
	Sum string `json:"sum,omitempty"`
	// From are the images the build starts from (not its own stages),
	// in the Dockerfile's order: named in the user's confirmation, and
	// their registries allowed for the build.
	From []From `json:"from,omitempty"`
}

// Label names b's Dockerfile for people: its path, or where a Compose
// file holds it ("compose.yaml: services.web.build.dockerfile_inline").
func (b *Build) Label() string {
	if b.Inline != "" {
		return b.InlineIn
	}
	return b.Dockerfile
}

// Compose is the Compose form: the agent runs in the VM, whose image is
// the dev service's; the other services run as containers under Docker
// inside the VM, their published ports on the VM's localhost and their
// names resolving to the VM.
type Compose struct {
	// Files are the Compose files, relative to the project, in the order
	// they are merged.
	Files []string `json:"files"`
	// Service is the dev service: the one the agent runs in.
	Service string `json:"service"`
	// RunServices are the services to start, as devcontainer.json's
	// runServices names them, else every service but the dev service, in
	// name order.
	RunServices []string `json:"runServices,omitempty"`
	// Services are what the runtime starts: RunServices, the dev
	// service's dependencies and theirs, never the dev service, in name
	// order.
	Services []Service `json:"services,omitempty"`
	// DevVolumes are the dev service's own mounts, made in the VM: a
	// bind's source is a folder of the project's copy, a volume a folder
	// of the sandbox's disk. The dev service's mount of the project
	// itself is not here: the project is at workspaceFolder.
	DevVolumes []Volume `json:"devVolumes,omitempty"`
}

// Service is one Compose service to run beside the agent.
type Service struct {
	Name string `json:"name"`
	// Image is the image to pull; with Build, the name the project
	// gives the built image, which the runtime does not use (it names
	// the image itself, so it is never taken for a registry's).
	Image string `json:"image,omitempty"`
	// Build, when set, builds the service's image from the project.
	Build *Build `json:"build,omitempty"`
	// Command and Entrypoint replace the image's when not nil.
	Command    []string `json:"command,omitempty"`
	Entrypoint []string `json:"entrypoint,omitempty"`
	User       string   `json:"user,omitempty"`
	WorkingDir string   `json:"workingDir,omitempty"`
	// Environment is the service's variables: its env_file entries read
	// from the project, then its environment over them.
	Environment map[string]string `json:"environment,omitempty"`
	// Ports are the published ports, reachable on the VM's localhost.
	Ports []Port `json:"ports,omitempty"`
	// DependsOn are the services it waits for, by name.
	DependsOn []Dependency `json:"dependsOn,omitempty"`
	// Healthcheck is the service's health test; nil means the image's.
	Healthcheck *Healthcheck `json:"healthcheck,omitempty"`
	// Volumes are its mounts; a bind's source is relative to the project
	// (binds that leave it are not here: they are warnings).
	Volumes    []Volume `json:"volumes,omitempty"`
	Privileged bool     `json:"privileged,omitempty"`
	CapAdd     []string `json:"capAdd,omitempty"`
	Platform   string   `json:"platform,omitempty"`
	// DockerSocket, when set, is where the service binds the Docker
	// socket: it gets the VM's own daemon's (Docker inside the VM),
	// never the host's.
	DockerSocket string `json:"dockerSocket,omitempty"`
}

// Port is one published port of a service.
type Port struct {
	Target    uint32 `json:"target"`
	Published string `json:"published,omitempty"`
	HostIP    string `json:"hostIP,omitempty"`
	Protocol  string `json:"protocol,omitempty"`
}

// Dependency is a service another waits for, and for what:
// "service_started", "service_healthy" or
// "service_completed_successfully".
type Dependency struct {
	Service   string `json:"service"`
	Condition string `json:"condition"`
}

// Healthcheck is a service's health test.
type Healthcheck struct {
	// Test is the test as Compose writes it: ["CMD", prog, args...],
	// ["CMD-SHELL", line] or ["NONE"].
	Test        []string      `json:"test,omitempty"`
	Interval    time.Duration `json:"interval,omitempty"`
	Timeout     time.Duration `json:"timeout,omitempty"`
	StartPeriod time.Duration `json:"startPeriod,omitempty"`
	Retries     uint64        `json:"retries,omitempty"`
	Disable     bool          `json:"disable,omitempty"`
}

// Volume is one mount of a service.
type Volume struct {
	// Type is "bind", "volume" or "tmpfs".
	Type string `json:"type"`
	// Source is, for a bind, the path relative to the project; for a
	// volume, its name (empty: anonymous).
	Source   string `json:"source,omitempty"`
	Target   string `json:"target"`
	ReadOnly bool   `json:"readOnly,omitempty"`
}

// Feature is one Dev Container feature the description asks for.
type Feature struct {
	// ID is the feature's reference as written
	// ("ghcr.io/devcontainers/features/node:1").
	ID string `json:"id"`
	// Name is the feature's short name ("node"), Version its tag ("1";
	// empty: the latest).
	Name    string `json:"name"`
	Version string `json:"version,omitempty"`
	// Options are the feature's options; a boolean or a number is kept
	// as its JSON text ("true", "18").
	Options map[string]string `json:"options,omitempty"`
	// Ref is the OCI reference the feature is fetched from
	// ("ghcr.io/devcontainers/features/node:1"; a bare "node" is the Dev
	// Container project's); empty for one Airlock cannot fetch (a folder
	// of the project, a tarball's URL).
	Ref string `json:"ref,omitempty"`
	// Supported says Airlock installs it, by its own install.sh in the
	// builder VM (or, for docker-in-docker and docker-outside-of-docker,
	// gives Docker inside the VM).
	Supported bool `json:"supported"`
}

// RunArg is one argument of devcontainer.json's runArgs (with its value
// when it takes one: "--security-opt seccomp=unconfined").
type RunArg struct {
	Arg  string  `json:"arg"`
	Kind ArgKind `json:"kind"`
}

// ArgKind is what Airlock makes of a runArgs argument.
type ArgKind string

const (
	// ArgNotNeeded is a container privilege a VM already has
	// (--privileged, --cap-add SYS_PTRACE, seccomp=unconfined, --init).
	ArgNotNeeded ArgKind = "not needed"
	// ArgDocker is a bind of the Docker socket: Docker inside the VM
	// instead.
	ArgDocker ArgKind = "docker"
	// ArgVolume is a named volume: its path is on the sandbox's own disk.
	ArgVolume ArgKind = "volume"
	// ArgHosts is --add-host NAME:IP: an /etc/hosts entry of every
	// sandbox (Environment.AddHosts).
	ArgHosts ArgKind = "hosts"
	// ArgIgnored is anything else: it is not applied.
	ArgIgnored ArgKind = "ignored"
)

// Step is one setup command: either Shell (run by /bin/sh -c) or Argv
// (run directly, no shell), never both.
type Step struct {
	// Origin is the key the step came from: "setup", "onCreateCommand",
	// "postCreateCommand", "postStartCommand", "postAttachCommand".
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
	return len(e.Apt) > 0 || len(e.Setup) > 0 || e.Build != nil || e.Compose != nil || len(e.Features) > 0 || e.Docker
}

// keyVersion changes when the key's encoding does, so an old cache entry
// is never taken for a new one.
const keyVersion = "airlock-environment-v1"

// Key is a stable SHA-256 (hex) of everything that determines the built
// environment: image, packages in their order, setup steps in their
// order, the environment variables (sorted by name) and the user. The
// same description gives the same key on every machine, whichever file
// it came from; any change gives another. The Dockerfile build, Compose
// setup, features and Docker are part of it only when there are any, so
// an image-form description keeps the key it always had. Source, Hosts,
// WorkspaceFolder, Warnings and the steps' Name and Origin do not change
// what is built, so they are not part of it; nor are Start and AddHosts,
// which act in each sandbox, not in the image. Image is the reference as
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
	if e.Build != nil || e.Compose != nil || len(e.Features) > 0 || e.Docker {
		// encoding/json writes struct fields in order and map keys
		// sorted, so the same description encodes alike everywhere.
		more, err := json.Marshal(struct {
			Build    *Build
			Compose  *Compose
			Features []Feature
			Docker   bool
		}{e.Build, e.Compose, e.Features, e.Docker})
		if err != nil {
			panic(err) // plain data: cannot fail
		}
		w.str("more")
		w.str(string(more))
	}
	h.Write(w.buf)
	return hex.EncodeToString(h.Sum(nil))
}

// AsksConfirmation reports whether the environment asks for anything the
// user must confirm before Airlock acts on it: an image to pull, hosts to
// reach, anything to install or run (NeedsNetwork), commands run as
// each sandbox starts, or /etc/hosts entries.
func (e *Environment) AsksConfirmation() bool {
	return e.Image != "" || len(e.Hosts) > 0 || e.NeedsNetwork() || len(e.Start) > 0 || len(e.AddHosts) > 0
}

// ConfirmKey is what the user's confirmation of the environment is
// recorded against: Key, the hosts its setup may reach (sorted), and the
// commands and /etc/hosts entries of each sandbox's start, in their
// order. Key leaves those out (they do not change what is built); a
// confirmation must not, or a trusted environment could be pointed at
// another host, or made to run another command, unasked. An
// environment without start commands or entries keeps the key it
// always had.
func (e *Environment) ConfirmKey() string {
	var w keyWriter
	w.str("airlock-environment-confirmation-v1")
	w.str(e.Key())
	hosts := slices.Clone(e.Hosts)
	sort.Strings(hosts)
	w.strs("hosts", hosts)
	if len(e.Start) > 0 || len(e.AddHosts) > 0 {
		w.str("start")
		w.num(len(e.Start))
		for _, s := range e.Start {
			w.str(s.Origin)
			if s.Argv != nil {
				w.strs("argv", s.Argv)
			} else {
				w.str("shell")
				w.str(s.Shell)
			}
		}
		w.num(len(e.AddHosts))
		for _, h := range e.AddHosts {
			w.str(h.Name)
			w.str(h.IP)
		}
	}
	sum := sha256.Sum256(w.buf)
	return hex.EncodeToString(sum[:])
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
