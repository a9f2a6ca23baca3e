// Package home locates Airlock's state directory (images, objects,
// sandboxes, caches) on each operating system, and keeps it private to
// its owner.
//
// It is plain path logic: it must not import vm, guest, sync, review or fyne.
package home

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
)

// Env is the environment variable that overrides the home directory.
const Env = "AIRLOCK_HOME"

// Dir returns Airlock's home directory for this process: $AIRLOCK_HOME, else
// the per-OS default. It does not create it.
func Dir() (string, error) {
	return dirFor(runtime.GOOS, os.Getenv, os.UserHomeDir)
}

// dirFor is Dir for any OS, so one host can test every OS.
func dirFor(goos string, getenv func(string) string, userHome func() (string, error)) (string, error) {
	if d := getenv(Env); d != "" {
		return filepath.Abs(d)
	}
	h, err := userHome()
	if err != nil || h == "" {
		return "", fmt.Errorf("find home directory (set %s to choose where Airlock keeps its state): %w", Env, errors.Join(err, errors.New("no home directory")))
	}
	switch goos {
	case "darwin":
		return filepath.Join(h, "Library", "Application Support", "Airlock"), nil
	default:
		if x := getenv("XDG_DATA_HOME"); x != "" && filepath.IsAbs(x) {
			return filepath.Join(x, "airlock"), nil
		}
		return filepath.Join(h, ".local", "share", "airlock"), nil
	}
}

// privateMode is the mode of the home and of the folders right under it
// that hold the user's data: only the user can list or enter them, so a
// project file that was 0600 is not readable by other local users once
// it sits in the content store.
const privateMode = 0o700

// Make creates the home directory root if it does not exist, private to
// its owner (0700), and tightens it if it does (see Tighten). Whatever
// creates the home should call it first, so that nothing below is ever
// readable by other users.
func Make(root string) error {
	if err := os.MkdirAll(root, privateMode); err != nil {
		return fmt.Errorf("create Airlock's home: %w", err)
	}
	return Tighten(root)
}

// Tighten takes group and other permissions away from an existing home
// root and from the folders right under it that hold the user's data
// (objects/, sandboxes/, cache/, run/, keys/): homes made before Airlock kept
// them private were 0755. It changes only what has such bits, so it costs
// a few stats on every open; it walks nothing deeper (the objects written
// as 0444 then are out of reach behind a 0700 objects/). A missing home
// or folder is left alone.
func Tighten(root string) error {
	l := Layout{Root: root}
	for i, dir := range []string{root, l.Objects(), l.Sandboxes(), l.Cache(), l.Runs(), l.Keys()} {
		stat := os.Lstat
		if i == 0 {
			stat = os.Stat // the home itself may be a symbolic link the user made
		}
		fi, err := stat(dir)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return fmt.Errorf("make Airlock's home private: %w", err)
		}
		if !fi.IsDir() || fi.Mode().Perm()&0o077 == 0 {
			continue
		}
		if err := os.Chmod(dir, fi.Mode().Perm()&privateMode); err != nil {
			return fmt.Errorf("make Airlock's home private: %s is %#o, readable by other users, and cannot be changed to %#o: %w",
				dir, fi.Mode().Perm(), fi.Mode().Perm()&privateMode, err)
		}
	}
	return nil
}

// Layout names the folders and files inside a home directory: every path
// under the home that app/ uses is made here, so that the layout is
// written down once (vm/image, which must not import app, lays out
// images/ and its build caches itself). Nothing is created.
//
//	images/<name>/<arch>/   built guest images (vm/image lays these out itself)
//	objects/                the content-addressed store
//	sandboxes/<id>/         one sandbox's state
//	run/<name>/             a running machine's runtime files
//	cache/warm/             warm snapshots per image and machine shape
//	cache/qemu/             QEMU's probe verdicts
//	cache/guest/            guest agents built from source
//	cache/stat/<hash>       a project's stat cache for the snapshot walk (app/pipeline)
//	cache/debs/, cache/npm/ downloaded packages for image builds (vm/image)
//	oci/blobs/sha256/       pulled OCI blobs, each once (vm/oci)
//	builds/<image>/         the last provisioning of an image: output.log, audit.jsonl
//	caches/<project>/       a project's dependency caches: cache.img (app/pipeline)
//	trust.json              the trust store of project configurations
//	keys/audit.key          the key that signs the audit logs (app/audit)
type Layout struct{ Root string }

// Images is where built guest images live.
func (l Layout) Images() string { return filepath.Join(l.Root, "images") }

// Objects is the content-addressed store: baselines, pulled results,
// apply backups.
func (l Layout) Objects() string { return filepath.Join(l.Root, "objects") }

// OCI is the content store of pulled OCI images' blobs (vm/oci.Store).
func (l Layout) OCI() string { return filepath.Join(l.Root, "oci") }

// Builds holds, per provisioned image, the record of its last build.
func (l Layout) Builds() string { return filepath.Join(l.Root, "builds") }

// Caches holds, per project, the disk of its dependency caches.
func (l Layout) Caches() string { return filepath.Join(l.Root, "caches") }

// Sandboxes holds a directory per sandbox.
func (l Layout) Sandboxes() string { return filepath.Join(l.Root, "sandboxes") }

// Sandbox is the directory of sandbox id.
func (l Layout) Sandbox(id string) string { return filepath.Join(l.Sandboxes(), id) }

// Cache is for things that can be rebuilt or downloaded again.
func (l Layout) Cache() string { return filepath.Join(l.Root, "cache") }

// WarmCache holds the warm snapshots, per image and machine shape.
func (l Layout) WarmCache() string { return filepath.Join(l.Cache(), "warm") }

// BaseDisks holds projects' baselines as read-only disks (the disk sync
// mode), each named by its hash.
func (l Layout) BaseDisks() string { return filepath.Join(l.Cache(), "baselines") }

// QEMUCache holds what the QEMU backend keeps between runs (the KVM
// probe's verdicts).
func (l Layout) QEMUCache() string { return filepath.Join(l.Cache(), "qemu") }

// StatCache is the file that remembers, for the project at the absolute
// path project, the SHA-256 of its files by their stat data, so that a
// snapshot hashes only what changed.
func (l Layout) StatCache(project string) string {
	sum := sha256.Sum256([]byte(project))
	return filepath.Join(l.Cache(), "stat", hex.EncodeToString(sum[:16]))
}

// GuestCache holds guest agents built from source for a guest image.
func (l Layout) GuestCache() string { return filepath.Join(l.Cache(), "guest") }

// Runs is where machines keep their runtime files (sockets, console log,
// a supervisor's spec). Kept short because unix socket paths are limited
// in length.
func (l Layout) Runs() string { return filepath.Join(l.Root, "run") }

// Run is the runtime directory of the machine name (a sandbox's ID, or a
// random name for airlock exec).
func (l Layout) Run(name string) string { return filepath.Join(l.Runs(), name) }

// Keys holds the home's own keys, private to the user (0700).
func (l Layout) Keys() string { return filepath.Join(l.Root, "keys") }

// AuditKey is the Ed25519 key that signs the home's audit logs (0600).
func (l Layout) AuditKey() string { return filepath.Join(l.Keys(), "audit.key") }

// TrustFile is the trust store: the project configurations the user
// confirmed, by hash.
func (l Layout) TrustFile() string { return filepath.Join(l.Root, "trust.json") }

// BundleResources returns the Resources folder of the macOS app bundle
// whose main executable is exe ("/Applications/Airlock.app/Contents/MacOS/
// airlock" gives "/Applications/Airlock.app/Contents/Resources"), and false
// when exe does not sit in an .app bundle's Contents/MacOS. It only looks at
// the path: resolve symbolic links first.
func BundleResources(exe string) (string, bool) {
	if !filepath.IsAbs(exe) {
		return "", false
	}
	macos := filepath.Dir(filepath.Clean(exe))
	contents := filepath.Dir(macos)
	app := filepath.Dir(contents)
	if filepath.Base(macos) != "MacOS" || filepath.Base(contents) != "Contents" ||
		filepath.Ext(app) != ".app" || len(filepath.Base(app)) <= len(".app") {
		return "", false
	}
	return filepath.Join(contents, "Resources"), true
}

// ImageRoots returns where guest images are looked for, first match wins:
// the home h, then BundleImageRoots. Each root is laid out like a home
// (images/<name>/<arch>).
func ImageRoots(h string) []string {
	return append([]string{h}, BundleImageRoots()...)
}

// BundleImageRoots returns the read-only image roots that come with this
// program: when it runs from an app bundle (Airlock.app), the bundle's
// Contents/Resources, whose images/ holds the guest images shipped with
// the app; else none.
func BundleImageRoots() []string {
	exe, err := os.Executable()
	if err == nil {
		exe, err = filepath.EvalSymlinks(exe)
	}
	if err != nil {
		return nil
	}
	return bundleImageRoots(exe)
}

// bundleImageRoots is BundleImageRoots for the executable at exe.
func bundleImageRoots(exe string) []string {
	if res, ok := BundleResources(exe); ok {
		return []string{res}
	}
	return nil
}
