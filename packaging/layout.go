package packaging

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"

	"github.com/airlock-dev/airlock/vm"
	"github.com/airlock-dev/airlock/vm/image"
)

// Paths inside an app bundle, relative to the bundle directory. The images
// folder mirrors an Airlock home's images/ (images/<name>/<arch>/…), so
// that Contents/Resources can be searched like a read-only home.
const (
	ContentsDir  = "Contents"
	MacOSDir     = "Contents/MacOS"
	ResourcesDir = "Contents/Resources"
	ImagesDir    = "Contents/Resources/images"
)

// ImageRef names one guest image to ship.
type ImageRef struct {
	Name string
	Arch vm.Arch
}

// Bundle is what goes into Airlock.app.
type Bundle struct {
	// Info fills InfoTemplate (the repository's Info.plist.tmpl).
	Info         Info
	InfoTemplate string
	// Binary is the airlock binary (universal, signed later).
	Binary string
	// Icon is the .icns file (assets/Airlock.icns).
	Icon string
	// ImagesHome is an Airlock home whose images/ holds Images, as
	// `airlock image build` leaves them.
	ImagesHome string
	Images     []ImageRef
}

// Entry is one file or directory of a bundle.
type Entry struct {
	// Path is slash-separated and relative to the directory the bundle is
	// made in: "Airlock.app/Contents/MacOS/airlock".
	Path string
	// Mode is fs.ModeDir|0o755 for directories, 0o755 for the executable,
	// 0o644 otherwise.
	Mode fs.FileMode
	// Source is the file copied into place; empty for directories and
	// generated files.
	Source string
	// Data is a generated file's content (Info.plist, PkgInfo).
	Data []byte
}

// AppDir is the bundle's directory name: "Airlock.app".
func (b Bundle) AppDir() string { return b.Info.Name + ".app" }

// Layout renders the Info.plist and lists every directory and file of the
// bundle, parents before children, in a stable order. It reads no file:
// sources are checked by Assemble.
func (b Bundle) Layout() ([]Entry, error) {
	var errs []error
	if b.Info.Name == "" || strings.ContainsAny(b.Info.Name, `/\`) {
		errs = append(errs, fmt.Errorf("bundle: app name %q is not a file name", b.Info.Name))
	}
	if b.Binary == "" {
		errs = append(errs, errors.New("bundle: no airlock binary"))
	}
	if b.Icon == "" {
		errs = append(errs, errors.New("bundle: no icon"))
	}
	if len(b.Images) > 0 && b.ImagesHome == "" {
		errs = append(errs, errors.New("bundle: images to ship but no home to take them from"))
	}
	seen := map[ImageRef]bool{}
	for _, im := range b.Images {
		if im.Name == "" || strings.ContainsAny(im.Name, `/\`) || strings.HasPrefix(im.Name, ".") {
			errs = append(errs, fmt.Errorf("bundle: image name %q is not a plain name", im.Name))
		}
		if im.Arch != vm.AMD64 && im.Arch != vm.ARM64 {
			errs = append(errs, fmt.Errorf("bundle: image %s: unknown arch %q", im.Name, im.Arch))
		}
		if seen[im] {
			errs = append(errs, fmt.Errorf("bundle: image %s/%s listed twice", im.Name, im.Arch))
		}
		seen[im] = true
	}
	plist, err := RenderInfoPlist(b.InfoTemplate, b.Info)
	errs = append(errs, err)
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}

	app := b.AppDir()
	files := []Entry{
		{Path: path.Join(app, ContentsDir, "Info.plist"), Mode: 0o644, Data: plist},
		{Path: path.Join(app, ContentsDir, "PkgInfo"), Mode: 0o644, Data: []byte("APPL????")},
		{Path: path.Join(app, MacOSDir, b.Info.Executable), Mode: 0o755, Source: b.Binary},
		{Path: path.Join(app, ResourcesDir, b.Info.IconFile), Mode: 0o644, Source: b.Icon},
	}
	for _, im := range b.Images {
		src := image.Dir(b.ImagesHome, im.Name, im.Arch)
		for _, f := range []string{image.MetaFile, image.KernelFile, image.InitrdFile} {
			files = append(files, Entry{
				Path:   path.Join(app, ImagesDir, im.Name, string(im.Arch), f),
				Mode:   0o644,
				Source: filepath.Join(src, f),
			})
		}
	}
	dirs := map[string]bool{}
	for _, f := range files {
		for d := path.Dir(f.Path); d != "."; d = path.Dir(d) {
			dirs[d] = true
		}
	}
	out := make([]Entry, 0, len(dirs)+len(files))
	for d := range dirs {
		out = append(out, Entry{Path: d, Mode: fs.ModeDir | 0o755})
	}
	out = append(out, files...)
	sort.SliceStable(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	return out, nil
}

// Listing is the layout as text, one entry a line: mode, path, and where
// the content comes from.
func Listing(entries []Entry) string {
	var b strings.Builder
	for _, e := range entries {
		from := ""
		switch {
		case e.Mode.IsDir():
		case e.Source != "":
			from = "  <- " + e.Source
		default:
			from = fmt.Sprintf("  (generated, %d bytes)", len(e.Data))
		}
		fmt.Fprintf(&b, "%s  %s%s\n", e.Mode, e.Path, from)
	}
	return b.String()
}

// Assemble creates the entries under dir, creating dir if needed. The bundle directory must not
// exist yet: a stale bundle would keep files this build does not ship.
// Every missing source is reported at once, before anything is written.
func Assemble(entries []Entry, dir string) error {
	var errs []error
	for _, e := range entries {
		if e.Source == "" {
			continue
		}
		if st, err := os.Stat(e.Source); err != nil {
			errs = append(errs, err)
		} else if !st.Mode().IsRegular() {
			errs = append(errs, fmt.Errorf("%s is not a regular file", e.Source))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("assemble bundle: %w", err)
	}
	for _, e := range entries {
		if top := strings.Split(e.Path, "/")[0]; e.Path == top {
			if _, err := os.Lstat(filepath.Join(dir, top)); err == nil {
				return fmt.Errorf("assemble bundle: %s already exists; remove it first", filepath.Join(dir, top))
			}
		}
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("assemble bundle: %w", err)
	}
	for _, e := range entries {
		dst := filepath.Join(dir, filepath.FromSlash(e.Path))
		var err error
		switch {
		case e.Mode.IsDir():
			err = os.Mkdir(dst, e.Mode.Perm())
		case e.Source != "":
			err = copyFile(e.Source, dst, e.Mode.Perm())
		default:
			err = os.WriteFile(dst, e.Data, e.Mode.Perm())
		}
		if err != nil {
			return fmt.Errorf("assemble bundle: %w", err)
		}
	}
	return nil
}

func copyFile(src, dst string, perm fs.FileMode) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return fmt.Errorf("copy %s: %w", src, err)
	}
	return out.Close()
}
