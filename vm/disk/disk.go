// Package disk owns copy-on-write clones and sparse copies of files and
// disk images: a sandbox boots a clone of its image's root disk, never the
// image itself and never a full copy. Clone tries the OS's file clone
// first (a reflink on Linux, APFS clonefile on macOS) and, where the
// backend can take one, falls back to a qcow2 overlay whose backing file
// is the image (qemu-img). Keep makes a lasting copy of a disk (a
// checkpoint's, a warm snapshot's), cloned or copied sparsely; FileCopier
// copies plain files, reflinked where the file system can.
//
// It is plain files and the qemu-img tool: it must not import app, guest,
// sync, review, the hypervisor packages (vm/qemu, vm/vz), fyne or vz.
package disk

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// Formats of a disk image, as vm.Disk.Format spells them.
const (
	Raw   = "raw"
	QCOW2 = "qcow2"
)

// Method names how a clone was made.
type Method string

const (
	MethodReflink Method = "reflink"   // FICLONE (Linux: btrfs, xfs, bcachefs…)
	MethodClone   Method = "clonefile" // APFS clonefile (macOS)
	MethodOverlay Method = "qcow2"     // a qcow2 overlay backed by the base image
	MethodCopy    Method = "copy"      // a copy of the data (Keep only)
)

// ErrNoClone means no copy-on-write clone could be made: the file system
// cannot clone files and no overlay is possible.
var ErrNoClone = errors.New("no copy-on-write clone possible")

// Options says which fallbacks a clone may use.
type Options struct {
	// Overlay allows a qcow2 overlay when the file system cannot clone
	// files. Only QEMU reads qcow2; vz takes raw images only.
	Overlay bool
	// QemuImg is the qemu-img to run; empty means qemu-img from PATH.
	QemuImg string
}

// Result says what Clone made.
type Result struct {
	Method Method
	// Format is the clone's format (Raw or QCOW2), for vm.Disk.Format.
	Format string
}

// cloner makes dst a copy-on-write clone of src, or fails.
type cloner struct {
	method Method
	format string
	clone  func(ctx context.Context, src, dst string) error
}

// Clone makes dst a copy-on-write clone of the image src (raw, or a qcow2
// overlay, which only an overlay of it can clone). dst must not exist. It tries each method of plan in order and returns the first that
// works; the errors of all of them when none does, wrapping ErrNoClone.
// A failed attempt leaves no dst behind.
func Clone(ctx context.Context, src, dst string, o Options) (Result, error) {
	return cloneWith(ctx, src, dst, plan(o))
}

// plan is the order in which clone methods are tried: the OS's file clone,
// then (if allowed) a qcow2 overlay.
func plan(o Options) []cloner {
	var p []cloner
	if m, f := fileClone(); f != nil {
		p = append(p, cloner{method: m, format: Raw, clone: func(_ context.Context, src, dst string) error { return f(src, dst) }})
	}
	if o.Overlay {
		p = append(p, cloner{method: MethodOverlay, format: QCOW2, clone: func(ctx context.Context, src, dst string) error {
			return overlay(ctx, o.QemuImg, src, dst)
		}})
	}
	return p
}

func cloneWith(ctx context.Context, src, dst string, p []cloner) (Result, error) {
	if _, err := os.Lstat(dst); err == nil {
		return Result{}, fmt.Errorf("clone %s: %s exists", src, dst)
	}
	if _, err := os.Stat(src); err != nil {
		return Result{}, fmt.Errorf("clone: %w", err)
	}
	var errs []error
	for _, c := range p {
		err := c.clone(ctx, src, dst)
		if err == nil {
			return Result{Method: c.method, Format: c.format}, nil
		}
		os.Remove(dst)
		errs = append(errs, fmt.Errorf("%s: %w", c.method, err))
	}
	if len(errs) == 0 {
		errs = append(errs, errors.New("this OS has no file clone and no overlay was allowed"))
	}
	return Result{}, fmt.Errorf("clone %s to %s: %w: %w", src, dst, ErrNoClone, errors.Join(errs...))
}

// overlay creates dst as a qcow2 image backed by the raw image src (by its
// absolute path: the overlay is only good while src stays where it is).
func overlay(ctx context.Context, qemuImg, src, dst string) error {
	if qemuImg == "" {
		p, err := exec.LookPath("qemu-img")
		if err != nil {
			return fmt.Errorf("qemu-img not found (Debian: apt-get install qemu-utils; macOS: brew install qemu): %w", err)
		}
		qemuImg = p
	}
	abs, err := filepath.Abs(src)
	if err != nil {
		return err
	}
	format, err := Format(abs)
	if err != nil {
		return err
	}
	cmd := exec.CommandContext(ctx, qemuImg, overlayArgs(format, abs, dst)...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("%s: %w (%s)", qemuImg, err, strings.TrimSpace(out.String()))
	}
	return nil
}

// OverlayArgs is qemu-img's command line for a qcow2 overlay at dst backed
// by the raw image base (an absolute path).
func OverlayArgs(base, dst string) []string { return overlayArgs(Raw, base, dst) }

func overlayArgs(format, base, dst string) []string {
	return []string{"create", "-q", "-f", QCOW2, "-F", format, "-b", base, dst}
}

// Keep makes dst a lasting copy of the disk src as it is now, as cheaply
// as it can: a raw image is cloned (reflink or clonefile) where the file
// system can, and copied sparsely (its data only, holes left as holes)
// where it cannot; a qcow2 overlay is small (only what was written on its
// base) and is copied. src must not change meanwhile (its machine paused,
// its block layer flushed). dst must not exist; a failed Keep leaves none.
func Keep(ctx context.Context, src, dst string) (Result, error) {
	format, err := Format(src)
	if err != nil {
		return Result{}, err
	}
	if format == Raw {
		res, err := Clone(ctx, src, dst, Options{})
		if err == nil {
			return res, nil
		}
		if !errors.Is(err, ErrNoClone) {
			return Result{}, fmt.Errorf("keep %s: %w", src, err)
		}
	}
	if err := copySparse(src, dst); err != nil {
		return Result{}, fmt.Errorf("keep %s: %w", src, err)
	}
	return Result{Method: MethodCopy, Format: format}, nil
}

// qcow2Magic starts every qcow2 image ("QFI\xfb").
var qcow2Magic = []byte{'Q', 'F', 'I', 0xfb}

// Format reports the format of the image at path: QCOW2 when it starts
// with qcow2's magic, Raw otherwise.
func Format(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	head := make([]byte, len(qcow2Magic))
	if _, err := io.ReadFull(f, head); err != nil && !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, io.EOF) {
		return "", fmt.Errorf("read %s: %w", path, err)
	}
	if bytes.Equal(head, qcow2Magic) {
		return QCOW2, nil
	}
	return Raw, nil
}

// maxBacking bounds a qcow2 backing file name (qcow2 allows 1023 bytes).
const maxBacking = 1023

// Backing is the backing file of the qcow2 image at path, resolved
// against path's directory as QEMU resolves it, or "" for a raw image or
// a qcow2 image without one. It reads qcow2's header only: written when
// the overlay was made, never by the guest, whose writes go to data
// clusters.
func Backing(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	var h [20]byte
	if _, err := io.ReadFull(f, h[:]); err != nil || !bytes.Equal(h[:4], qcow2Magic) {
		return "", nil // shorter than a qcow2 header, or raw
	}
	off, size := binary.BigEndian.Uint64(h[8:16]), binary.BigEndian.Uint32(h[16:20])
	if off == 0 || size == 0 {
		return "", nil
	}
	if size > maxBacking || off > 1<<21 {
		return "", fmt.Errorf("%s: qcow2 backing file name of %d bytes at %d: not a name QEMU would write", path, size, off)
	}
	name := make([]byte, size)
	if _, err := f.ReadAt(name, int64(off)); err != nil {
		return "", fmt.Errorf("read %s's backing file name: %w", path, err)
	}
	b := string(name)
	if !filepath.IsAbs(b) {
		b = filepath.Join(filepath.Dir(path), b)
	}
	return b, nil
}
