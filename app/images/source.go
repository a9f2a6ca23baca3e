package images

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"sync"

	"github.com/airlock-dev/airlock/app/config"
	"github.com/airlock-dev/airlock/vm"
	"github.com/airlock-dev/airlock/vm/image"
)

// Source gets the guest images this host's runs boot: it pulls OCI images
// (Pull), builds images in builder VMs (Build, BuildAgents), fetches the
// agent image (EnsureAgents) and makes a project's environment an image
// (Environment). Its fields are what it takes from the host; app/plan's
// Planner holds one made of its own.
type Source struct {
	// Home is Airlock's state directory: the images it makes, the OCI
	// content store, the builds' records and the trust store.
	Home string
	// ImageRoots are read-only places with built images, after Home (the
	// app bundle's).
	ImageRoots []string
	// Arch is the guest architecture when a request names none; empty
	// means the host's.
	Arch string
	// Backend starts builder VMs; nil cannot build (pulling still works).
	Backend func() (vm.Backend, error)
	// Limits sizes a builder whose request does not (its CPUs and
	// memory), read at each build; nil means Airlock's defaults.
	Limits func() (config.Limits, error)
	// AgentsRepo is where the published agent image is pulled from
	// (empty: AgentsRepo).
	AgentsRepo string
	// BuildOutput receives the setup steps' output when EnsureAgents
	// builds the agent image; nil keeps it in the build's record only.
	BuildOutput io.Writer
	// Note receives, for people, what they should know (an image without
	// glibc, an environment's warnings, an environment confirmed, a
	// builder's notices); nil discards.
	Note func(string)
	// BuildDial and BuildRootCAs replace the host's DNS and roots for the
	// builders' network (tests: a registry under its real name).
	BuildDial    func(ctx context.Context, network, addr string) (net.Conn, error)
	BuildRootCAs *x509.CertPool

	agentsMu sync.Mutex // one fetch of the agent image at a time
}

// errNoBackend is a Source that cannot boot a builder.
var errNoBackend = errors.New("this build of airlock cannot boot machines")

func (src *Source) backend() (vm.Backend, error) {
	if src.Backend == nil {
		return nil, errNoBackend
	}
	return src.Backend()
}

func (src *Source) limits() (config.Limits, error) {
	if src.Limits == nil {
		return config.DefaultLimits(), nil
	}
	return src.Limits()
}

func (src *Source) imageRoots() []string { return append([]string{src.Home}, src.ImageRoots...) }

// Find returns image name for arch (empty: the Source's) as built here:
// from the home, else the first image root that has it.
func (src *Source) Find(name, arch string) (*image.Image, error) {
	return image.Find(src.imageRoots(), name, vm.Arch(src.arch(arch)))
}

// check says why image name cannot boot here for arch (empty: the
// Source's), or nil.
func (src *Source) check(name, arch string) error {
	_, err := src.Find(name, arch)
	return err
}

// GuestArch is the guest architecture of a request that names a: a,
// else the Source's Arch, else the host's.
func (src *Source) GuestArch(a string) string { return src.arch(a) }

func (src *Source) arch(a string) string {
	switch {
	case a != "":
		return a
	case src.Arch != "":
		return src.Arch
	}
	return runtime.GOARCH
}

func (src *Source) note(format string, args ...any) {
	if src.Note != nil {
		src.Note(fmt.Sprintf(format, args...))
	}
}

// ProjectDir is dir as an absolute path to an existing directory: the
// project a run or an environment is made of (the planner's too).
func ProjectDir(dir string) (string, error) {
	if dir == "" {
		return "", errors.New("no project directory")
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	fi, err := os.Stat(abs)
	if err != nil {
		return "", fmt.Errorf("project: %w", err)
	}
	if !fi.IsDir() {
		return "", fmt.Errorf("project %s is not a directory", abs)
	}
	return abs, nil
}
