package oci

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"strconv"
	"strings"

	"github.com/Microsoft/hcsshim/ext4/tar2ext4"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/partial"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/airlock-dev/airlock/internal/bytesize"
	"github.com/airlock-dev/airlock/internal/diskfree"
)

// maxRootfs is the largest file system a root disk may describe.
const maxRootfs = 256 << 30

// maxEntries is the most files, directories and links a root disk may
// hold: the writer keeps each in memory until it closes, and a layer may
// come from a guest (a provisioning step).
const maxEntries = 4 << 20

// Rootfs is what a root disk written from an image holds.
type Rootfs struct {
	// Size is the disk's size in bytes.
	Size int64
	// Entries is the number of files, directories and links in it.
	Entries int
	// Libc is "glibc", "musl" or "" (neither loader found): Airlock's
	// agent CLIs run on a glibc image only.
	Libc string
	// Users are the accounts of the image's etc/passwd, name → uid, gid
	// (ParsePasswd), nil when it has none: who a project's files on a disk
	// must belong to, known before the image boots.
	Users map[string][2]int
}

// WriteRootfs writes the file system of im, its layers applied bottom
// first with OCI whiteouts, as a compact ext4 image at dst (replaced
// atomically). The guest mounts it read-only, as an overlay's lower layer.
// extra layers (uncompressed or compressed tar files, e.g. provisioning
// layers) go on top of the image's own, in order.
func (s Store) WriteRootfs(ctx context.Context, im *Image, dst string, extra ...string) (Rootfs, error) {
	var layers []v1.Layer
	in := inflation{ref: im.Ref, dir: path.Dir(dst)}
	for _, l := range im.Layers {
		in.compressed += l.Size
		d, err := v1.NewHash(l.Digest)
		if err != nil {
			return Rootfs{}, fmt.Errorf("layer %q: %w", l.Digest, err)
		}
		bl, err := partial.CompressedToLayer(&storedLayer{s: s, d: d, size: l.Size, mt: types.MediaType(l.MediaType)})
		if err != nil {
			return Rootfs{}, err
		}
		layers = append(layers, bl)
	}
	for _, p := range extra {
		bl, err := fileLayer(p)
		if err != nil {
			return Rootfs{}, err
		}
		if n, err := bl.Size(); err == nil {
			in.compressed += n
		}
		layers = append(layers, bl)
	}
	img := layered{Image: empty.Image, layers: layers}
	tmp := dst + ".tmp"
	os.Remove(tmp)
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_EXCL|os.O_RDWR, 0o644)
	if err != nil {
		return Rootfs{}, err
	}
	defer os.Remove(tmp)
	flat := mutate.Extract(img)
	defer flat.Close()
	pr, pw := io.Pipe()
	var res Rootfs
	go func() { pw.CloseWithError(reorder(ctx, flat, &inflationWriter{w: pw, in: &in}, &res)) }()
	err = tar2ext4.ConvertTarToExt4(pr, f, tar2ext4.MaximumDiskSize(maxRootfs))
	pr.CloseWithError(errors.New("conversion stopped"))
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return Rootfs{}, fmt.Errorf("write the root disk of %s: %w", im.Ref, err)
	}
	fi, err := os.Stat(tmp)
	if err != nil {
		return Rootfs{}, err
	}
	res.Size = fi.Size()
	return res, os.Rename(tmp, dst)
}

// What the layers may inflate to while their disk is written: a layer of
// a few megabytes of gzip can hold gigabytes of zeros (4 MB gave a 4 GiB
// file, written to the host's disk whole), and a provisioning layer comes
// from a guest. Past maxInflatedFloor, the file system may be at most
// maxInflation times the layers as stored; and the host's disk keeps
// minFree.
const maxInflation = 100

// Variables for the tests' sake.
var (
	maxInflatedFloor int64 = 1 << 30
	minFree          int64 = 1 << 30
	freeCheckEvery   int64 = 256 << 20
)

// inflation is what the layers of one image have inflated to so far.
type inflation struct {
	ref        string
	dir        string // where the disk is written
	compressed int64  // the layers' bytes as stored
	written    int64  // the flattened tar's bytes so far
	nextCheck  int64
}

// limit is the most the flattened layers may reach.
func (in *inflation) limit() int64 {
	return max(maxInflatedFloor, maxInflation*in.compressed)
}

// inflationWriter passes the flattened tar on, failing with the figures
// once it passes the inflation limit or the host's disk runs low.
type inflationWriter struct {
	w  io.Writer
	in *inflation
}

func (iw *inflationWriter) Write(p []byte) (int, error) {
	in := iw.in
	in.written += int64(len(p))
	if in.written > in.limit() {
		return 0, fmt.Errorf("the layers of %s inflate to more than %s from %s as stored (over %d to 1): Airlock does not write such an image's disk (a decompression bomb, or an image far larger than its download)",
			in.ref, bytesize.Format(in.limit()), bytesize.Format(in.compressed), maxInflation)
	}
	if in.written >= in.nextCheck {
		in.nextCheck = in.written + freeCheckEvery
		if free := diskfree.Bytes(in.dir); free >= 0 && free < minFree {
			return 0, fmt.Errorf("the host's disk has %s left after %s of the disk of %s: Airlock stops rather than fill it; free some space (old sandboxes: airlock rm; environments: airlock env rm) and try again",
				bytesize.Format(free), bytesize.Format(in.written), in.ref)
		}
	}
	return iw.w.Write(p)
}

// reorder copies the flattened tar stream from r to w, with hard links
// last (a layer's link may name a file of a lower layer, which the
// top-down flattening writes after it), counting entries and noting the
// C library's dynamic loader on the way.
func reorder(ctx context.Context, r io.Reader, w io.Writer, res *Rootfs) error {
	tr := tar.NewReader(r)
	tw := tar.NewWriter(w)
	var links []*tar.Header
	var passwd *headBuffer
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return err
		}
		res.Entries++
		if res.Entries > maxEntries {
			return fmt.Errorf("the image has more than %d entries, more than Airlock writes into a disk", maxEntries)
		}
		noteLibc(h.Name, res)
		if h.Typeflag == tar.TypeLink {
			links = append(links, h)
			continue
		}
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		var body io.Reader = tr
		if h.Typeflag == tar.TypeReg && path.Clean("/"+h.Name) == "/etc/passwd" {
			passwd = &headBuffer{max: maxPasswd}
			body = io.TeeReader(tr, passwd)
		}
		if _, err := io.Copy(tw, body); err != nil {
			return err
		}
	}
	if passwd != nil {
		res.Users = ParsePasswd(passwd.b)
	}
	// The flattening writes the tar's end even when it fails: its error
	// comes after.
	if _, err := io.Copy(io.Discard, r); err != nil {
		return err
	}
	for _, h := range links {
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
	}
	return tw.Close()
}

// maxPasswd is the most of an image's etc/passwd that is read for its
// accounts (a layer may come from a guest).
const maxPasswd = 1 << 20

// maxUsers is the most accounts ParsePasswd returns.
const maxUsers = 4096

// headBuffer keeps the first max bytes written to it and drops the rest.
type headBuffer struct {
	b   []byte
	max int
}

func (h *headBuffer) Write(p []byte) (int, error) {
	if room := h.max - len(h.b); room > 0 {
		h.b = append(h.b, p[:min(room, len(p))]...)
	}
	return len(p), nil
}

// ParsePasswd reads the accounts of an etc/passwd file
// (name:password:uid:gid:…), name → uid, gid, as hostile input: a line
// that is malformed, cut short (the last one, without its newline, when
// data is a file's head), names an account Airlock could not run as (see
// ValidUser) or gives an id outside 0…2³¹-1 is skipped; the first line
// of a name wins, as for getpwnam; at most 4096 accounts. Nil when none.
func ParsePasswd(data []byte) map[string][2]int {
	var users map[string][2]int
	for len(data) > 0 && len(users) < maxUsers {
		i := bytes.IndexByte(data, '\n')
		if i < 0 {
			break // the last line is cut short, or has no newline: either way not trusted
		}
		line := string(data[:i])
		data = data[i+1:]
		f := strings.SplitN(line, ":", 5)
		if len(f) < 5 || !ValidUser(f[0]) {
			continue
		}
		uid, ok1 := parseID(f[2])
		gid, ok2 := parseID(f[3])
		if !ok1 || !ok2 {
			continue
		}
		if _, dup := users[f[0]]; dup {
			continue
		}
		if users == nil {
			users = map[string][2]int{}
		}
		users[f[0]] = [2]int{uid, gid}
	}
	return users
}

// parseID reads a decimal uid or gid, 0…2³¹-1, digits only.
func parseID(s string) (int, bool) {
	if s == "" || len(s) > 10 || strings.Trim(s, "0123456789") != "" {
		return 0, false
	}
	n, err := strconv.ParseUint(s, 10, 31)
	return int(n), err == nil
}

// ValidUser says whether name is an account name Airlock runs commands
// as: 1 to 32 characters, a lower-case letter or '_' first, then
// lower-case letters, digits, '_' or '-'.
func ValidUser(name string) bool {
	if name == "" || len(name) > 32 {
		return false
	}
	for i, r := range name {
		if !(r >= 'a' && r <= 'z' || r == '_' || i > 0 && (r >= '0' && r <= '9' || r == '-')) {
			return false
		}
	}
	return true
}

// noteLibc records which dynamic loader the image has.
func noteLibc(name string, res *Rootfs) {
	base := path.Base(name)
	switch {
	case strings.HasPrefix(base, "ld-musl-"):
		if res.Libc == "" {
			res.Libc = "musl"
		}
	case strings.HasPrefix(base, "ld-linux") && strings.Contains(base, ".so"):
		res.Libc = "glibc"
	}
}

// layered is an image of the given layers, for mutate.Extract, which asks
// for nothing else (mutate.AppendLayers would read every layer once more,
// for a configuration nobody reads).
type layered struct {
	v1.Image
	layers []v1.Layer
}

func (l layered) Layers() ([]v1.Layer, error) { return l.layers, nil }

// storedLayer is a layer whose compressed bytes are a blob in the store.
type storedLayer struct {
	s    Store
	d    v1.Hash
	size int64
	mt   types.MediaType
}

func (l *storedLayer) Digest() (v1.Hash, error)            { return l.d, nil }
func (l *storedLayer) Size() (int64, error)                { return l.size, nil }
func (l *storedLayer) MediaType() (types.MediaType, error) { return l.mt, nil }
func (l *storedLayer) Compressed() (io.ReadCloser, error)  { return l.s.Open(l.d) }

// fileLayer is a layer kept as a tar file (gzip, zstd or plain) outside
// the store.
func fileLayer(p string) (v1.Layer, error) {
	fi, err := os.Stat(p)
	if err != nil {
		return nil, err
	}
	return partial.CompressedToLayer(&pathLayer{p: p, size: fi.Size()})
}

type pathLayer struct {
	p    string
	size int64
}

func (l *pathLayer) Digest() (v1.Hash, error) {
	f, err := os.Open(l.p)
	if err != nil {
		return v1.Hash{}, err
	}
	defer f.Close()
	h, _, err := v1.SHA256(f)
	return h, err
}
func (l *pathLayer) Size() (int64, error)                { return l.size, nil }
func (l *pathLayer) MediaType() (types.MediaType, error) { return types.OCILayer, nil }
func (l *pathLayer) Compressed() (io.ReadCloser, error)  { return os.Open(l.p) }
