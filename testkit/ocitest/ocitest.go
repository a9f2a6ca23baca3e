// Package ocitest is for tests only: an OCI registry on loopback
// (go-containerregistry's pkg/registry, in process) and images made of tar
// layers written in the test, pushed to it. It must not import app, guest,
// the hypervisor packages (vm/qemu, vm/vz), fyne or vz.
package ocitest

import (
	"archive/tar"
	"bytes"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// Registry is a registry on loopback for one test.
type Registry struct {
	// Host is its HOST:PORT, the first part of an image reference.
	Host string

	mu             sync.Mutex
	user, password string // the only credentials accepted, when set
	requests       int
}

// RequireCredentials makes user and password the only credentials the
// registry accepts (basic auth), from now on.
func (r *Registry) RequireCredentials(user, password string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.user, r.password = user, password
}

// Requests is how many requests it served.
func (r *Registry) Requests() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.requests
}

// NewRegistry serves an empty registry until the test ends.
func NewRegistry(t testing.TB) *Registry {
	t.Helper()
	r := &Registry{}
	h := registry.New(registry.Logger(nilLogger()))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		r.mu.Lock()
		r.requests++
		user, password := r.user, r.password
		r.mu.Unlock()
		if user != "" {
			u, p, ok := req.BasicAuth()
			if !ok || u != user || p != password {
				w.Header().Set("WWW-Authenticate", `Basic realm="test"`)
				w.WriteHeader(http.StatusUnauthorized)
				io.WriteString(w, `{"errors":[{"code":"UNAUTHORIZED","message":"authentication required"}]}`)
				return
			}
		}
		h.ServeHTTP(w, req)
	}))
	t.Cleanup(srv.Close)
	r.Host = strings.TrimPrefix(srv.URL, "http://")
	return r
}

// Keychain gives the registry's credentials for every registry.
func (r *Registry) Keychain() authn.Keychain {
	r.mu.Lock()
	defer r.mu.Unlock()
	return keychain{authn.FromConfig(authn.AuthConfig{Username: r.user, Password: r.password})}
}

// Anonymous is a keychain without credentials.
func Anonymous() authn.Keychain { return keychain{authn.Anonymous} }

type keychain struct{ a authn.Authenticator }

func (k keychain) Resolve(authn.Resource) (authn.Authenticator, error) { return k.a, nil }

// Entry is one member of a tar layer.
type Entry struct {
	Name string
	// Type is a tar type flag; 0 is a regular file.
	Type     byte
	Mode     int64
	Body     string
	Linkname string
}

// Layer is a tar layer of entries, in order.
func Layer(t testing.TB, entries ...Entry) v1.Layer {
	t.Helper()
	return LayerFromTar(t, Tar(t, entries...))
}

// Tar is the tar stream of entries.
func Tar(t testing.TB, entries ...Entry) []byte {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range entries {
		h := &tar.Header{Name: e.Name, Typeflag: e.Type, Mode: e.Mode, Linkname: e.Linkname,
			ModTime: time.Unix(1700000000, 0), Format: tar.FormatPAX}
		if h.Typeflag == 0 {
			h.Typeflag = tar.TypeReg
		}
		if h.Mode == 0 {
			h.Mode = 0o644
			if h.Typeflag == tar.TypeDir {
				h.Mode = 0o755
			}
		}
		if h.Typeflag == tar.TypeReg {
			h.Size = int64(len(e.Body))
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if _, err := io.WriteString(tw, e.Body); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// LayerFromTar is a gzip-compressed layer of the tar stream b.
func LayerFromTar(t testing.TB, b []byte) v1.Layer {
	t.Helper()
	l, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(b)), nil })
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// Image is an image of layers (bottom first) for linux/arch, with env.
func Image(t testing.TB, arch string, env []string, layers ...v1.Layer) v1.Image {
	t.Helper()
	img, err := mutate.AppendLayers(empty.Image, layers...)
	if err != nil {
		t.Fatal(err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture = "linux", arch
	if arch == "arm64" {
		cf.Variant = "v8"
	}
	cf.Config.Env = env
	img, err = mutate.ConfigFile(img, cf)
	if err != nil {
		t.Fatal(err)
	}
	return img
}

// Push puts img in the registry as repo:tag and returns its reference.
func (r *Registry) Push(t testing.TB, repoTag string, img v1.Image) string {
	t.Helper()
	ref := r.Host + "/" + repoTag
	tag, err := name.ParseReference(ref, name.Insecure)
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.Write(tag, img, remote.WithAuthFromKeychain(r.Keychain())); err != nil {
		t.Fatal(err)
	}
	return ref
}

// PushIndex puts an index of imgs (each for its configuration's platform)
// in the registry as repo:tag and returns its reference.
func (r *Registry) PushIndex(t testing.TB, repoTag string, imgs ...v1.Image) string {
	t.Helper()
	var idx v1.ImageIndex = empty.Index
	for _, img := range imgs {
		cf, err := img.ConfigFile()
		if err != nil {
			t.Fatal(err)
		}
		idx = mutate.AppendManifests(idx, mutate.IndexAddendum{Add: img, Descriptor: v1.Descriptor{
			Platform: &v1.Platform{OS: cf.OS, Architecture: cf.Architecture, Variant: cf.Variant}}})
	}
	ref := r.Host + "/" + repoTag
	tag, err := name.ParseReference(ref, name.Insecure)
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.WriteIndex(tag, idx, remote.WithAuthFromKeychain(r.Keychain())); err != nil {
		t.Fatal(err)
	}
	return ref
}

func nilLogger() *log.Logger { return log.New(io.Discard, "", 0) }

// LayerFromFile is the layer of a tar file (gzip-compressed or not).
func LayerFromFile(t testing.TB, path string) v1.Layer {
	t.Helper()
	l, err := tarball.LayerFromFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return l
}
