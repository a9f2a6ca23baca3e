package envspec

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"

	"github.com/airlock-dev/airlock/app/config"
)

// The files Find reads, relative to the project, in the order it tries
// them.
const (
	tomlFile         = config.FileName
	devcontainerFile = ".devcontainer/devcontainer.json"
	devcontainerRoot = ".devcontainer.json"
)

// maxFileSize caps what Find reads of each file: a description is small.
const maxFileSize = 1 << 20

// Find reads the project's environment. The first found wins:
// airlock.toml's [environment] table, then .devcontainer/devcontainer.json,
// then .devcontainer.json. Without any it returns nil, nil: the project
// uses the agent image. An error names the file and what is wrong in it,
// every problem at once.
func Find(projectDir string) (*Environment, error) {
	root, err := os.OpenRoot(projectDir)
	if err != nil {
		return nil, fmt.Errorf("find the project's environment: %w", err)
	}
	defer root.Close()
	files, err := newProjectFiles(root, projectDir)
	if err != nil {
		return nil, err
	}

	data, err := readFile(root, projectDir, tomlFile)
	if err != nil {
		return nil, err
	}
	if data != nil {
		p, err := config.Parse(data)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", filepath.Join(projectDir, tomlFile), err)
		}
		if p.Environment != nil {
			env, err := fromTOML(p.Environment, files)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", filepath.Join(projectDir, tomlFile), err)
			}
			return env, nil
		}
	}
	for _, name := range []string{devcontainerFile, devcontainerRoot} {
		data, err := readFile(root, projectDir, name)
		if err != nil {
			return nil, err
		}
		if data == nil {
			continue
		}
		return devcontainer(files, projectDir, name, data)
	}
	return nil, nil
}

// ReadDevcontainer reads the devcontainer.json at name (slash-separated,
// relative to the project; for instance one of several under
// .devcontainer/NAME/devcontainer.json), as Find reads the one it finds.
func ReadDevcontainer(projectDir, name string) (*Environment, error) {
	if _, ok := inProject(".", name); !ok {
		return nil, fmt.Errorf("%s is not a path inside the project", name)
	}
	root, err := os.OpenRoot(projectDir)
	if err != nil {
		return nil, fmt.Errorf("read the project's environment: %w", err)
	}
	defer root.Close()
	files, err := newProjectFiles(root, projectDir)
	if err != nil {
		return nil, err
	}
	data, err := readFile(root, projectDir, name)
	if err != nil {
		return nil, err
	}
	if data == nil {
		return nil, fmt.Errorf("%s: %w", filepath.Join(projectDir, filepath.FromSlash(name)), fs.ErrNotExist)
	}
	return devcontainer(files, projectDir, name, data)
}

// devcontainer reads the devcontainer.json name holds data of, naming it
// in its errors and warnings.
func devcontainer(files projectFiles, projectDir, name string, data []byte) (*Environment, error) {
	env, err := fromDevcontainer(files, name, data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", filepath.Join(projectDir, filepath.FromSlash(name)), err)
	}
	env.Source = name
	for i := range env.Warnings {
		env.Warnings[i].Text = name + ": " + env.Warnings[i].Text
	}
	return env, nil
}

// newProjectFiles is the project's files, read through root.
func newProjectFiles(root *os.Root, projectDir string) (projectFiles, error) {
	abs, err := filepath.Abs(projectDir)
	if err != nil {
		return projectFiles{}, fmt.Errorf("find the project's environment: %w", err)
	}
	return projectFiles{fsys: root.FS(), dir: abs, base: filepath.Base(abs)}, nil
}

// readFile reads name (slash-separated, relative to the project) through
// root, so that no link, in the name or any directory on its way, leads
// out of the project. A missing file is nil, nil; anything but a regular
// file, or one over maxFileSize, is an error.
func readFile(root *os.Root, projectDir, name string) ([]byte, error) {
	path := filepath.Join(projectDir, filepath.FromSlash(name))
	lfi, err := root.Lstat(name)
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) {
		return nil, nil
	}
	// Stat, not Lstat: a link that stays inside the project is fine; one
	// that leaves it fails here, before anything is opened.
	fi, err := root.Stat(name)
	switch {
	case err == nil:
	case lfi != nil && lfi.Mode().Type() == fs.ModeSymlink && errors.Is(err, fs.ErrNotExist):
		return nil, fmt.Errorf("%s is a link to a file that does not exist; fix or remove it", path)
	default:
		return nil, fmt.Errorf("%s: Airlock reads a project's environment file only inside the project and does not follow a link out of it; "+
			"make it a plain file in the project (%w)", path, err)
	}
	if !fi.Mode().IsRegular() {
		// Opening a fifo would block; a device is never a description.
		return nil, fmt.Errorf("%s is not a regular file (%s); Airlock reads it only as one", path, fi.Mode().Type())
	}
	f, err := root.Open(name)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	defer f.Close()
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%s changed while it was read; try again", path)
	}
	data, err := io.ReadAll(io.LimitReader(f, maxFileSize+1))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	if len(data) > maxFileSize {
		return nil, fmt.Errorf("%s is larger than %d bytes; a project's environment description is small, so Airlock does not read it", path, maxFileSize)
	}
	if i := bytes.IndexByte(data, 0); i >= 0 {
		return nil, fmt.Errorf("%s has a NUL byte at offset %d; a description is text, so Airlock does not read it", path, i)
	}
	return data, nil
}
