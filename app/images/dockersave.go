package images

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"path"
	"strconv"
	"strings"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/airlock-dev/airlock/vm/oci"
)

// Caps on what a guest's `docker save` may hold: its files (an image's
// layers, its configuration, the manifest), the small ones kept in
// memory until the manifest says which are which.
const (
	maxSavedEntries = 4096
	maxSavedSmall   = 1 << 20  // a file kept in memory: a configuration, the manifest, a small layer
	maxSavedSmalls  = 32 << 20 // all of them
)

// savedImage is an image a builder VM's Docker made, read from its
// `docker save`: the layers (plain tars, bottom first) are blobs of the
// content store, and Config what the configuration says about running it.
type savedImage struct {
	// ID is the configuration's digest (Docker's image ID).
	ID       v1.Hash
	Layers   []v1.Hash
	Config   oci.Config
	Platform string
}

// savedFile is one regular file of the archive: in memory (small), or a
// blob being written, kept only if the manifest names it as a layer.
type savedFile struct {
	data []byte
	blob *oci.BlobWriter
	sum  v1.Hash
	size int64
}

// readDockerSave reads `docker save IMAGE` (Docker's archive format:
// manifest.json naming the configuration and the layers, by path; the
// legacy layout of Docker 20.10 and the OCI layout of Docker 25 both
// have it) from a guest, at most limit bytes, keeping the layers in st.
// The archive is hostile: its paths are only names in it (nothing is
// written where they say), links may point only at its own files, each
// layer must be the one the configuration's diff_ids name, and what the
// manifest does not name is dropped. The layers are tar streams checked
// like any pulled layer when the image's disk is written.
func readDockerSave(r io.Reader, st oci.Store, limit int64) (*savedImage, error) {
	a := &savedArchive{files: map[string]*savedFile{}, links: map[string]string{}}
	defer a.abort()
	if err := a.read(tar.NewReader(&capReader{r: r, left: limit}), st); err != nil {
		return nil, err
	}
	mf, err := a.file("manifest.json")
	if err != nil {
		return nil, err
	}
	var manifest []struct {
		Config string
		Layers []string
	}
	if mf.data == nil || json.Unmarshal(mf.data, &manifest) != nil || len(manifest) != 1 {
		return nil, errors.New("the image Docker saved has no manifest.json of one image")
	}
	cf, err := a.file(manifest[0].Config)
	if err != nil {
		return nil, err
	}
	if cf.data == nil {
		return nil, fmt.Errorf("the image Docker saved has a configuration of more than %d bytes", maxSavedSmall)
	}
	cfg, err := v1.ParseConfigFile(bytes.NewReader(cf.data))
	if err != nil {
		return nil, fmt.Errorf("the image Docker saved has a configuration that does not parse: %w", err)
	}
	if len(cfg.RootFS.DiffIDs) != len(manifest[0].Layers) {
		return nil, fmt.Errorf("the image Docker saved has %d layers and its configuration names %d", len(manifest[0].Layers), len(cfg.RootFS.DiffIDs))
	}
	out := &savedImage{ID: cf.sum, Platform: cfg.OS + "/" + cfg.Architecture,
		Config: oci.Config{Env: cfg.Config.Env, User: cfg.Config.User, WorkingDir: cfg.Config.WorkingDir}}
	for i, l := range manifest[0].Layers {
		f, err := a.file(l)
		if err != nil {
			return nil, err
		}
		if f.sum != cfg.RootFS.DiffIDs[i] {
			return nil, fmt.Errorf("layer %d of the image Docker saved is not the one its configuration names (%s, not %s)", i+1, f.sum, cfg.RootFS.DiffIDs[i])
		}
		switch {
		case f.blob != nil:
			d, _, err := f.blob.Commit()
			f.blob = nil
			if err != nil {
				return nil, err
			}
			if d != f.sum {
				return nil, fmt.Errorf("layer %d of the image Docker saved changed while it was kept", i+1)
			}
		case f.data != nil:
			if err := st.Put(f.sum, f.size, bytes.NewReader(f.data)); err != nil {
				return nil, err
			}
		}
		out.Layers = append(out.Layers, f.sum)
	}
	return out, nil
}

// archiveName is a path inside an archive made clean, or false when it
// is empty or leaves the archive.
func archiveName(p string) (string, bool) {
	c := path.Clean("/" + p)[1:]
	if c == "" || strings.ContainsRune(p, 0) || len(p) > 1024 {
		return "", false
	}
	if strings.HasPrefix(p, "/") || p == ".." || strings.HasPrefix(p, "../") || strings.Contains(p, "/../") || strings.HasSuffix(p, "/..") {
		return "", false
	}
	return c, true
}

func savedErr(err error) error {
	if errors.Is(err, errCapped) {
		return err
	}
	return fmt.Errorf("read the image Docker saved: %w", err)
}

func hashSum(h hash.Hash) v1.Hash {
	return v1.Hash{Algorithm: "sha256", Hex: hex.EncodeToString(h.Sum(nil))}
}

// errCapped is an archive larger than its reader's cap.
var errCapped = errors.New("the image Docker saved is larger than Airlock takes from a builder")

// capReader reads at most left bytes of r, then fails with errCapped.
type capReader struct {
	r    io.Reader
	left int64
}

func (c *capReader) Read(p []byte) (int, error) {
	if c.left <= 0 {
		return 0, errCapped
	}
	if int64(len(p)) > c.left {
		p = p[:c.left]
	}
	n, err := c.r.Read(p)
	c.left -= int64(n)
	return n, err
}

// savedArchive is what readDockerSave has read of an archive: its files
// by name, and its links.
type savedArchive struct {
	files map[string]*savedFile
	links map[string]string
}

// abort drops the blobs not kept.
func (a *savedArchive) abort() {
	for _, f := range a.files {
		if f.blob != nil {
			f.blob.Abort() // kept ones are committed and nil
		}
	}
}

// read reads every entry of the archive: small files into memory, large
// ones into uncommitted blobs of st, links as names.
func (a *savedArchive) read(tr *tar.Reader, st oci.Store) error {
	var small int64
	for n := 0; ; n++ {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return fmt.Errorf("the image Docker saved is not a tar archive: %w", err)
		}
		if n == maxSavedEntries {
			return fmt.Errorf("the image Docker saved has more than %d files", maxSavedEntries)
		}
		name, ok := archiveName(h.Name)
		if !ok {
			return fmt.Errorf("the image Docker saved has a file named %s", strconv.Quote(h.Name))
		}
		if _, dup := a.files[name]; dup || a.links[name] != "" {
			return fmt.Errorf("the image Docker saved has %s twice", strconv.Quote(name))
		}
		switch h.Typeflag {
		case tar.TypeDir:
		case tar.TypeSymlink, tar.TypeLink:
			target := h.Linkname
			if h.Typeflag == tar.TypeSymlink && !strings.HasPrefix(target, "/") {
				target = path.Join(path.Dir(name), target)
			}
			t, ok := archiveName(target)
			if !ok {
				return fmt.Errorf("the image Docker saved links %s out of itself", strconv.Quote(name))
			}
			a.links[name] = t
		case tar.TypeReg:
			f := &savedFile{}
			if h.Size <= maxSavedSmall && small+h.Size <= maxSavedSmalls {
				small += h.Size
				if f.data, err = io.ReadAll(io.LimitReader(tr, maxSavedSmall+1)); err != nil {
					return savedErr(err)
				}
				f.sum, f.size, _ = v1.SHA256(bytes.NewReader(f.data))
			} else {
				if f.blob, err = st.NewBlob(); err != nil {
					return err
				}
				a.files[name] = f
				hw := sha256.New()
				if f.size, err = io.Copy(io.MultiWriter(f.blob, hw), tr); err != nil {
					return savedErr(err)
				}
				f.sum = hashSum(hw)
			}
			a.files[name] = f
		default:
			return fmt.Errorf("the image Docker saved has %s, of a kind an image archive does not hold (%c)", strconv.Quote(name), h.Typeflag)
		}
	}
	return nil
}

// file is the file called name, through its links.
func (a *savedArchive) file(name string) (*savedFile, error) {
	n, ok := archiveName(name)
	if !ok {
		return nil, fmt.Errorf("the image Docker saved names a file %s", strconv.Quote(name))
	}
	for i := 0; i < 8 && a.links[n] != ""; i++ {
		n = a.links[n]
	}
	f := a.files[n]
	if f == nil {
		return nil, fmt.Errorf("the image Docker saved names %s, which it does not hold", strconv.Quote(name))
	}
	return f, nil
}
