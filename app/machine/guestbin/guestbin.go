// Package guestbin finds the airlock-guest binary for a guest architecture:
// a prebuilt one shipped beside the airlock executable (or in the macOS
// bundle's Resources), else one built from the Airlock source tree with the
// Go toolchain, which is how developers and CI get it.
//
// It must not import vm/qemu, vm/vz, fyne, sync or review.
package guestbin

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// Module is the Go module path of the Airlock source tree.
const Module = "github.com/airlock-dev/airlock"

// Package is the import path of the airlock-guest main package.
const Package = Module + "/guest/cmd/airlock-guest"

// Name is the file name of a prebuilt guest binary for arch.
func Name(arch string) string { return "airlock-guest-linux-" + arch }

// ErrNotFound: no prebuilt binary and no source tree to build one from.
var ErrNotFound = errors.New("airlock-guest binary not found")

// Finder locates or builds guest binaries.
type Finder struct {
	// Executable is the running airlock binary; prebuilt guests are looked
	// for beside it and in ../Resources. Empty means os.Executable.
	Executable string
	// SourceDir is an Airlock source tree to build from. Empty means: search
	// upward from the working directory and from Executable for a go.mod of
	// Module.
	SourceDir string
	// BuildDir receives binaries built from source.
	BuildDir string
}

// Find returns the path of a static airlock-guest for linux/arch.
func (f Finder) Find(ctx context.Context, arch string) (string, error) {
	exe := f.Executable
	if exe == "" {
		if e, err := os.Executable(); err == nil {
			exe = e
		}
	}
	if exe != "" {
		if r, err := filepath.EvalSymlinks(exe); err == nil {
			exe = r
		}
	}
	src := f.SourceDir
	if src == "" {
		src = findSource(exe)
	}
	// An airlock built inside the source tree (bin/airlock) is a developer's:
	// a guest binary beside it may be older than the source, so build from
	// the source (incremental, about a second) instead of trusting it.
	devBuild := src != "" && exe != "" && within(exe, src)
	if exe != "" && !devBuild {
		dir := filepath.Dir(exe)
		for _, p := range []string{
			filepath.Join(dir, Name(arch)),
			filepath.Join(dir, "..", "Resources", Name(arch)),
			filepath.Join(dir, "..", "lib", "airlock", Name(arch)),
		} {
			if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() {
				return p, nil
			}
		}
	}
	if src == "" {
		return "", fmt.Errorf("%w for linux/%s: put %s beside the airlock binary (make build does), or run airlock from inside the Airlock source tree so it can build one", ErrNotFound, arch, Name(arch))
	}
	return f.build(ctx, src, arch)
}

func (f Finder) build(ctx context.Context, src, arch string) (string, error) {
	if _, err := exec.LookPath("go"); err != nil {
		return "", fmt.Errorf("%w for linux/%s: building it from %s needs the Go toolchain on PATH", ErrNotFound, arch, src)
	}
	if f.BuildDir == "" {
		return "", errors.New("build airlock-guest: no build directory")
	}
	if err := os.MkdirAll(f.BuildDir, 0o700); err != nil { // cache/ is the user's: private
		return "", fmt.Errorf("build airlock-guest: %w", err)
	}
	out := filepath.Join(f.BuildDir, Name(arch))
	// -buildvcs=false: the binary is the same for the same source,
	// whatever the commit and the user's go env (an image records the
	// guest agent it holds, and one that differs is rebuilt).
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-buildvcs=false", "-ldflags=-s -w", "-o", out, "./guest/cmd/airlock-guest")
	cmd.Dir = src
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH="+arch)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("build airlock-guest for linux/%s in %s: %w\n%s", arch, src, err, strings.TrimSpace(stderr.String()))
	}
	return out, nil
}

// within reports whether path lies inside dir.
func within(path, dir string) bool {
	rel, err := filepath.Rel(dir, path)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator))
}

// findSource looks upward from the working directory, then from the
// executable's directory, for the go.mod of Module.
func findSource(exe string) string {
	var starts []string
	if wd, err := os.Getwd(); err == nil {
		starts = append(starts, wd)
	}
	if exe != "" {
		starts = append(starts, filepath.Dir(exe))
	}
	for _, d := range starts {
		for {
			if isSourceTree(d) {
				return d
			}
			parent := filepath.Dir(d)
			if parent == d {
				break
			}
			d = parent
		}
	}
	return ""
}

func isSourceTree(dir string) bool {
	b, err := os.ReadFile(filepath.Join(dir, "go.mod"))
	if err != nil {
		return false
	}
	first, _, _ := strings.Cut(string(b), "\n")
	return strings.TrimSpace(first) == "module "+Module
}
