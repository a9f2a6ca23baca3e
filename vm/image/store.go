package image

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/BurntSushi/toml"

	"github.com/airlock-dev/airlock/vm"
)

// File names inside an image directory.
const (
	KernelFile = "kernel"
	InitrdFile = "initrd"
	MetaFile   = "image.toml"
)

// MetaFormat is the version of the image.toml layout this package writes.
const MetaFormat = 1

// ErrNotFound: the image has not been built. The wrapping error names the
// command that builds it.
var ErrNotFound = errors.New("image not found")

// Image is a built image in the store.
type Image struct {
	Name string
	Arch vm.Arch
	// Dir is the image directory, HOME/images/<name>/<arch>.
	Dir string
	// Kernel is the path of the kernel to boot: an uncompressed vmlinux
	// with a PVH entry (amd64) or an uncompressed arm64 Image.
	Kernel string
	// Initrd is the path of the initramfs (uncompressed newc cpio).
	Initrd string
	// Cmdline is the kernel command line, without console=.
	Cmdline string
	// Rootfs is the path of the image's root disk (a raw ext4 image that
	// each sandbox boots a copy-on-write clone of, as the machine's first
	// disk); empty when the image runs from its initramfs (minimal).
	Rootfs string
	// Lower is the path of the read-only disk of an image made from an OCI
	// image (LowerFile): every sandbox's overlay root has it as its lower
	// layer and its clone of Rootfs (blank) as the upper. Empty otherwise.
	Lower string
	// Meta is what image.toml says about how the image was built.
	Meta Meta
}

// Meta is the content of image.toml: what built the image.
type Meta struct {
	Format  int       `toml:"format"`
	Name    string    `toml:"name"`
	Arch    vm.Arch   `toml:"arch"`
	Created time.Time `toml:"created"`
	// Cmdline is the kernel command line to boot with, without console=
	// (the VM backend adds its own).
	Cmdline string      `toml:"cmdline"`
	Kernel  KernelMeta  `toml:"kernel"`
	Initrd  FileMeta    `toml:"initrd"`
	Busybox PackageMeta `toml:"busybox"`
	// Guest is the airlock-guest binary installed as /init.
	Guest FileMeta `toml:"guest"`
	// Modules are the kernel modules in the initramfs, in load order
	// (dependencies first), by module name.
	Modules []string `toml:"modules"`
	// BuiltinModules are wanted modules this kernel has built in.
	BuiltinModules []string `toml:"builtin_modules,omitempty"`
	// MissingModules are optional wanted modules this kernel lacks
	// altogether (neither a module nor built in).
	MissingModules []string `toml:"missing_modules,omitempty"`
	// DockerModules are the modules of a Docker Engine in the initramfs
	// (image.DockerModules with their dependencies), in load order,
	// loaded only when one starts; none in an image built before them.
	DockerModules []string `toml:"docker_modules,omitempty"`
	// Rootfs describes the root disk, when the image has one (full, or
	// the blank upper layer of an image made from an OCI image).
	Rootfs *RootfsMeta `toml:"rootfs,omitempty"`
	// Lower describes the read-only disk of an image made from an OCI
	// image; OCI what it was made from.
	Lower *FileMeta `toml:"lower,omitempty"`
	OCI   *OCIMeta  `toml:"oci,omitempty"`
	// Users are the image's accounts, name → "uid:gid" (the full image's
	// user; an OCI image's etc/passwd): who owns a project's files on a
	// disk made for the image, known before it boots (Owner).
	Users map[string]string `toml:"users,omitempty"`
}

// KernelMeta says which kernel an image boots.
type KernelMeta struct {
	// Package and Version name the Debian package the kernel came from;
	// MetaPackage is the meta package it was resolved from.
	MetaPackage string `toml:"meta_package"`
	Package     string `toml:"package"`
	Version     string `toml:"version"`
	// Release is the kernel release (uname -r).
	Release string `toml:"release"`
	// Format is "vmlinux-pvh" (amd64) or "arm64-image".
	Format string `toml:"format"`
	FileMeta
}

// PackageMeta names a Debian package.
type PackageMeta struct {
	Package string `toml:"package"`
	Version string `toml:"version"`
}

// FileMeta identifies a file's content.
type FileMeta struct {
	SHA256 string `toml:"sha256"`
	Size   int64  `toml:"size"`
}

// Dir returns the directory of image name for arch under home.
func Dir(home, name string, arch vm.Arch) string {
	return filepath.Join(home, "images", name, string(arch))
}

// BuildCommand is the command that builds image name for arch.
func BuildCommand(name string, arch vm.Arch) string {
	return fmt.Sprintf("airlock image build --arch %s %s", arch, name)
}

// Load returns image name for arch from the store under home. An image that
// has not been built gives an error wrapping ErrNotFound that names the
// command building it; an image whose files are missing or truncated gives
// an error saying to rebuild it.
func Load(home, name string, arch vm.Arch) (*Image, error) {
	if err := validName(name); err != nil {
		return nil, fmt.Errorf("load image: %w", err)
	}
	if err := validArch(arch); err != nil {
		return nil, fmt.Errorf("load image: %w", err)
	}
	dir := Dir(home, name, arch)
	b, err := os.ReadFile(filepath.Join(dir, MetaFile))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("image %q for %s is not built (no %s); build it with `%s`: %w",
			name, arch, dir, BuildCommand(name, arch), ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("load image %s/%s: %w", name, arch, err)
	}
	var meta Meta
	if err := toml.Unmarshal(b, &meta); err != nil {
		return nil, fmt.Errorf("load image %s/%s: %s is damaged (%w); rebuild it with `%s`",
			name, arch, filepath.Join(dir, MetaFile), err, BuildCommand(name, arch))
	}
	if meta.Format != MetaFormat {
		return nil, fmt.Errorf("load image %s/%s: image.toml format %d, this airlock reads %d; rebuild it with `%s`",
			name, arch, meta.Format, MetaFormat, BuildCommand(name, arch))
	}
	if meta.Name != name || meta.Arch != arch {
		return nil, fmt.Errorf("load image %s/%s: %s describes %s/%s; rebuild it with `%s`",
			name, arch, filepath.Join(dir, MetaFile), meta.Name, meta.Arch, BuildCommand(name, arch))
	}
	im := &Image{
		Name:    name,
		Arch:    arch,
		Dir:     dir,
		Kernel:  filepath.Join(dir, KernelFile),
		Initrd:  filepath.Join(dir, InitrdFile),
		Cmdline: meta.Cmdline,
		Meta:    meta,
	}
	files := []struct {
		path string
		want int64
	}{{im.Kernel, meta.Kernel.Size}, {im.Initrd, meta.Initrd.Size}}
	if meta.Rootfs != nil {
		im.Rootfs = filepath.Join(dir, RootfsFile)
		files = append(files, struct {
			path string
			want int64
		}{im.Rootfs, meta.Rootfs.Size})
	}
	if meta.Lower != nil {
		im.Lower = filepath.Join(dir, LowerFile)
		files = append(files, struct {
			path string
			want int64
		}{im.Lower, meta.Lower.Size})
	}
	var errs []error
	for _, f := range files {
		st, err := os.Stat(f.path)
		switch {
		case err != nil:
			errs = append(errs, err)
		case st.Size() != f.want:
			errs = append(errs, fmt.Errorf("%s is %d bytes, image.toml says %d", f.path, st.Size(), f.want))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("load image %s/%s: %w; rebuild it with `%s`", name, arch, err, BuildCommand(name, arch))
	}
	return im, nil
}

// List returns every image in the store under home, sorted by name then
// arch. A directory that does not load (half-built, damaged) is left out;
// a store that does not exist yet is empty.
func List(home string) ([]*Image, error) {
	root := filepath.Join(home, "images")
	names, err := os.ReadDir(root)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("list images: %w", err)
	}
	var out []*Image
	for _, n := range names {
		if !n.IsDir() || validName(n.Name()) != nil {
			continue
		}
		arches, err := os.ReadDir(filepath.Join(root, n.Name()))
		if err != nil {
			return nil, fmt.Errorf("list images: %w", err)
		}
		for _, a := range arches {
			if !a.IsDir() || validArch(vm.Arch(a.Name())) != nil {
				continue
			}
			im, err := Load(home, n.Name(), vm.Arch(a.Name()))
			if err != nil {
				continue
			}
			out = append(out, im)
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Name != out[j].Name {
			return out[i].Name < out[j].Name
		}
		return out[i].Arch < out[j].Arch
	})
	return out, nil
}

// User is the account commands run as by default on this image: the
// root disk's unprivileged user, "" (the agent's own, root) without one
// or for a nil image.
func (im *Image) User() string {
	if im != nil && im.Meta.Rootfs != nil {
		return im.Meta.Rootfs.User
	}
	return ""
}

// Owner is the numeric uid and gid of user on this image, without
// booting it: 0, 0 for "" and "root"; the numbers of "N" (gid N too) or
// "N:M"; a name's from the image's account table (Meta.Users), or for the
// full image's user its recorded UID. ok is
// false for a name the image does not list (or a nil image), and for
// anything else.
func (im *Image) Owner(user string) (uid, gid int, ok bool) {
	switch user {
	case "", "root":
		return 0, 0, true
	}
	if uid, gid, ok := parseOwner(user, true); ok {
		return uid, gid, true
	}
	if im == nil {
		return 0, 0, false
	}
	if s, found := im.Meta.Users[user]; found {
		return parseOwner(s, false)
	}
	// A full image built before image.toml had the table: its user's
	// group has the user's number (useradd --user-group).
	if r := im.Meta.Rootfs; r != nil && r.User == user && r.UID > 0 && r.UID <= math.MaxInt32 {
		return r.UID, r.UID, true
	}
	return 0, 0, false
}

// parseOwner reads "uid:gid", or (alone) a bare "uid" whose gid is the
// same number. Each is decimal digits, 0…2³¹-1.
func parseOwner(s string, alone bool) (uid, gid int, ok bool) {
	u, g, colon := strings.Cut(s, ":")
	if !colon {
		if !alone {
			return 0, 0, false
		}
		g = u
	}
	uid, ok1 := parseID(u)
	gid, ok2 := parseID(g)
	if !ok1 || !ok2 {
		return 0, 0, false
	}
	return uid, gid, true
}

// parseID reads a decimal uid or gid, 0…2³¹-1, digits only.
func parseID(s string) (int, bool) {
	if s == "" || len(s) > 10 || strings.Trim(s, "0123456789") != "" {
		return 0, false
	}
	n, err := strconv.ParseUint(s, 10, 31)
	return int(n), err == nil
}

// ownerString is a uid:gid as Meta.Users records it.
func ownerString(uid, gid int) string {
	return strconv.Itoa(uid) + ":" + strconv.Itoa(gid)
}

// Verify hashes the image's kernel, initrd and root disk and compares them with
// image.toml. It reads every byte, so it is for `airlock doctor` and
// tests, not for every boot.
func (im *Image) Verify() error {
	var errs []error
	files := []struct {
		path string
		want FileMeta
	}{{im.Kernel, im.Meta.Kernel.FileMeta}, {im.Initrd, im.Meta.Initrd}}
	switch {
	case im.Meta.Lower != nil:
		// The blank upper layer's entry is an identity, not a hash.
		files = append(files, struct {
			path string
			want FileMeta
		}{im.Lower, *im.Meta.Lower})
	case im.Meta.Rootfs != nil:
		files = append(files, struct {
			path string
			want FileMeta
		}{im.Rootfs, im.Meta.Rootfs.FileMeta})
	}
	for _, f := range files {
		got, err := hashFile(f.path)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if got != f.want {
			errs = append(errs, fmt.Errorf("%s has sha256 %s (%d bytes), image.toml says %s (%d bytes)",
				f.path, got.SHA256, got.Size, f.want.SHA256, f.want.Size))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("verify image %s/%s: %w; rebuild it with `%s`", im.Name, im.Arch, err, BuildCommand(im.Name, im.Arch))
	}
	return nil
}

// hashFile returns the SHA-256 and size of the file at path.
func hashFile(path string) (FileMeta, error) {
	f, err := os.Open(path)
	if err != nil {
		return FileMeta{}, err
	}
	defer f.Close()
	h := sha256.New()
	n, err := io.Copy(h, f)
	if err != nil {
		return FileMeta{}, fmt.Errorf("hash %s: %w", path, err)
	}
	return FileMeta{SHA256: hex.EncodeToString(h.Sum(nil)), Size: n}, nil
}

func hashBytes(b []byte) FileMeta {
	sum := sha256.Sum256(b)
	return FileMeta{SHA256: hex.EncodeToString(sum[:]), Size: int64(len(b))}
}

// validName accepts image names that are one plain path element: lower-case
// letters, digits, '-', '_' and '.', not starting with '.' or '-'.
func validName(name string) error {
	if name == "" {
		return errors.New("empty image name")
	}
	if len(name) > 64 {
		return fmt.Errorf("image name %q is longer than 64 characters", name)
	}
	for i, r := range name {
		ok := r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-' || r == '_' || r == '.'
		if !ok || i == 0 && (r == '.' || r == '-') {
			return fmt.Errorf("image name %q: use lower-case letters, digits, '-', '_' and '.', not starting with '.' or '-'", name)
		}
	}
	return nil
}

func validArch(a vm.Arch) error {
	switch a {
	case vm.AMD64, vm.ARM64:
		return nil
	}
	return fmt.Errorf("unknown arch %q (want %s or %s)", a, vm.AMD64, vm.ARM64)
}

// debArch is Debian's name for a guest architecture.
func debArch(a vm.Arch) string { return strings.ToLower(string(a)) }

// Find loads image name for arch from the first of roots that has it. Each
// root is laid out like an Airlock home (root/images/<name>/<arch>): the
// user's home comes first, then read-only roots such as an app bundle's
// Contents/Resources, whose images ship with the app. An image that is
// present but damaged in an earlier root is an error, not a reason to look
// further. When no root has the image, the error is the first root's: it
// wraps ErrNotFound and names the command that builds the image there.
func Find(roots []string, name string, arch vm.Arch) (*Image, error) {
	if len(roots) == 0 {
		return nil, errors.New("load image: no image folders to search")
	}
	var first error
	for _, r := range roots {
		im, err := Load(r, name, arch)
		if err == nil {
			return im, nil
		}
		if !errors.Is(err, ErrNotFound) {
			return nil, err
		}
		if first == nil {
			first = err
		}
	}
	return nil, first
}

// ListAll lists the images of every root, sorted by name then arch. An
// image in more than one root is listed once, from the first root that has
// it, the one Find would load.
func ListAll(roots []string) ([]*Image, error) {
	seen := map[string]bool{}
	var out []*Image
	for _, r := range roots {
		ims, err := List(r)
		if err != nil {
			return nil, err
		}
		for _, im := range ims {
			k := im.Name + "/" + string(im.Arch)
			if !seen[k] {
				seen[k] = true
				out = append(out, im)
			}
		}
	}
	sort.SliceStable(out, func(i, j int) bool {
		if out[i].Name != out[j].Name {
			return out[i].Name < out[j].Name
		}
		return out[i].Arch < out[j].Arch
	})
	return out, nil
}
