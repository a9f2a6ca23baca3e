package image

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/airlock-dev/airlock/internal/diskfree"
	"github.com/airlock-dev/airlock/vm/ext4"
	"github.com/airlock-dev/airlock/vm/oci"
)

// LowerFile is an OCI-based image's read-only disk: its layers applied,
// the lower layer of every sandbox's overlay root.
const LowerFile = "lower.img"

// DefaultUpperSize is the size of a sandbox's upper layer on an OCI-based
// image: what the guest may write outside its workspace (it is sparse, and
// costs the host only what is written).
const DefaultUpperSize = 16 << 30

// LowerDevice is the guest's name of an OCI-based image's lower disk: the
// second disk, after the sandbox's upper layer (RootDevice).
const LowerDevice = "vdb"

// OCIMeta is what image.toml says of an image made from an OCI image.
type OCIMeta struct {
	oci.Image
	// Libc is the C library the image's loader belongs to ("glibc",
	// "musl", "" when it has none).
	Libc string `toml:"libc"`
	// Extra are the layers put on top of the image's own (provisioning),
	// as sha256 digests of their tar files, kept in the content store.
	Extra []string `toml:"extra,omitempty"`
	// Key identifies what went into a provisioned image (its base and
	// steps): the same key is the same image, built once.
	Key string `toml:"key,omitempty"`
	// Label says what the image is for, for people (a project's
	// environment: its directory and file).
	Label string `toml:"label,omitempty"`
}

// OCIOptions says how FromOCI makes an image.
type OCIOptions struct {
	// Name is the image's name in the store.
	Name string
	// Boot is the image whose kernel and initramfs boot it (the minimal
	// image of the same arch).
	Boot *Image
	// Store holds the pulled image's blobs; Image is what was pulled.
	Store oci.Store
	Image *oci.Image
	// Extra are layers (sha256 digests of tar files in Store) to put on
	// top of the image's.
	Extra []string
	// Key and Label are recorded in image.toml (OCIMeta).
	Key, Label string
	// User is the account commands run as by default (empty: root).
	User string
	// UpperSize is the size of each sandbox's upper layer; 0 is
	// DefaultUpperSize.
	UpperSize int64
	// Progress, when set, is told each step.
	Progress func(Progress)
}

// Steps of FromOCI.
const (
	StepLower Step = "lower" // the layers written as the read-only disk
	StepUpper Step = "upper" // the blank upper layer
)

// FromOCI makes the image o.Name in the store under home from a pulled OCI
// image: the boot image's kernel and initramfs, whose agent mounts the
// image as an overlay root; the layers (and o.Extra on top) as a compact
// read-only ext4 (LowerFile) that every sandbox of the image shares; and a
// blank ext4 (RootfsFile) that each sandbox clones as its own upper layer,
// so a new sandbox costs no copy of the image. Nothing here runs the
// image's programs or needs root. The new image replaces any of that name
// whole, or not at all.
func FromOCI(ctx context.Context, home string, o OCIOptions) (*Image, error) {
	if err := validName(o.Name); err != nil {
		return nil, err
	}
	if o.Boot == nil || o.Image == nil {
		return nil, errors.New("make an image from an OCI image: no boot image or no pulled image")
	}
	arch := o.Boot.Arch
	report := func(p Progress) {
		if o.Progress != nil {
			o.Progress(p)
		}
	}
	dst := Dir(home, o.Name, arch)
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return nil, err
	}
	tmp, err := os.MkdirTemp(filepath.Dir(dst), "."+string(arch)+".new-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)

	for _, f := range [][2]string{{o.Boot.Kernel, KernelFile}, {o.Boot.Initrd, InitrdFile}} {
		if err := copyFile(f[0], filepath.Join(tmp, f[1])); err != nil {
			return nil, fmt.Errorf("make image %s: %w", o.Name, err)
		}
	}
	if err := checkRoom(filepath.Dir(dst), o.Image, o.Extra, o.Store); err != nil {
		return nil, err
	}
	report(Progress{Step: StepLower, Item: fmt.Sprintf("%d layers", len(o.Image.Layers)+len(o.Extra))})
	var extraPaths []string
	for _, e := range o.Extra {
		d, err := v1.NewHash(e)
		if err != nil {
			return nil, fmt.Errorf("layer %q: %w", e, err)
		}
		if !o.Store.Has(d) {
			return nil, fmt.Errorf("layer %s is not in the content store %s", e, o.Store.Dir)
		}
		extraPaths = append(extraPaths, o.Store.Path(d))
	}
	rfs, err := o.Store.WriteRootfs(ctx, o.Image, filepath.Join(tmp, LowerFile), extraPaths...)
	if err != nil {
		return nil, err
	}
	lower, err := hashFile(filepath.Join(tmp, LowerFile))
	if err != nil {
		return nil, err
	}
	report(Progress{Step: StepLower, Item: fmt.Sprintf("%d entries", rfs.Entries), Done: lower.Size, Total: lower.Size})
	size := o.UpperSize
	if size <= 0 {
		size = DefaultUpperSize
	}
	report(Progress{Step: StepUpper, Total: size})
	if err := ext4.Format(filepath.Join(tmp, RootfsFile), size, "airlock-upper"); err != nil {
		return nil, err
	}
	meta := o.Boot.Meta
	meta.Name, meta.Arch = o.Name, arch
	meta.Created = time.Now().UTC().Truncate(time.Second)
	meta.Cmdline = o.Boot.Meta.Cmdline + " " + guestRootArg + "=" + RootDevice + " " + guestLowerArg + "=" + LowerDevice
	meta.Lower = &lower
	user := o.User
	if user == "" && plainUser(o.Image.Config.User) {
		user = o.Image.Config.User
	}
	meta.Rootfs = &RootfsMeta{FileMeta: upperIdentity(lower, size), User: user}
	meta.OCI = &OCIMeta{Image: *o.Image, Libc: rfs.Libc, Extra: o.Extra, Key: o.Key, Label: o.Label}
	meta.Users = nil
	for name, ids := range rfs.Users {
		if meta.Users == nil {
			meta.Users = make(map[string]string, len(rfs.Users))
		}
		meta.Users[name] = ownerString(ids[0], ids[1])
	}
	if err := writeMeta(filepath.Join(tmp, MetaFile), meta); err != nil {
		return nil, err
	}
	if err := install(tmp, dst); err != nil {
		return nil, fmt.Errorf("install image %s: %w", o.Name, err)
	}
	return Load(home, o.Name, arch)
}

// layerExpansion is how much larger a layer's files are than its
// compressed bytes, at most, for most images (gzip on binaries and text).
const layerExpansion = 3

// checkRoom refuses a disk that would not fit beside dir: an image's
// layers take about layerExpansion times their compressed size once
// written out.
func checkRoom(dir string, im *oci.Image, extra []string, st oci.Store) error {
	need := im.Size() * layerExpansion
	for _, e := range extra {
		if d, err := v1.NewHash(e); err == nil {
			if fi, err := os.Stat(st.Path(d)); err == nil {
				need += fi.Size() // provisioning layers are not compressed
			}
		}
	}
	free := diskfree.Bytes(dir)
	if free >= 0 && free < need {
		return fmt.Errorf("%s needs about %d MB for its disk and %s has %d MB free: free some space (airlock rm, airlock env rm, airlock image ls) and try again",
			im.Ref, need/1e6, dir, free/1e6)
	}
	return nil
}

// plainUser says whether an image configuration's User is an account
// name Airlock can run commands as (not root, not a uid or uid:gid).
func plainUser(u string) bool {
	return u != "root" && oci.ValidUser(u)
}

// upperIdentity stands for the blank upper layer's content in image.toml:
// a sandbox's upper layer is only good on the lower disk it was made on,
// so its identity is that disk's, with the size (hashing 16 GiB of holes
// would say nothing more).
func upperIdentity(lower FileMeta, size int64) FileMeta {
	sum := sha256.Sum256([]byte("airlock blank upper\x00" + lower.SHA256 + "\x00" + strconv.FormatInt(size, 10)))
	return FileMeta{SHA256: hex.EncodeToString(sum[:]), Size: size}
}

// guestLowerArg is guest.LowerArg (vm/image must not import guest).
const guestLowerArg = "airlock.lower"

// copyFile copies the boot image's kernel or initramfs (tens of MB).
func copyFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	_, err = io.Copy(out, in)
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	return err
}
