package oci

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/partial"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/airlock-dev/airlock/vm"
)

// PushOptions says how to push.
type PushOptions struct {
	Arch vm.Arch
	// User is the image's user (its configuration's User).
	User string
	// Keychain, Insecure and Transport are as for a pull.
	Keychain  authn.Keychain
	Insecure  bool
	Transport http.RoundTripper
}

// Push puts an image of im's layers and the extra layers (tar files in
// the store, by digest; a provisioning layer) in the registry as ref, so
// that another machine pulls the same image instead of building it. It
// returns the digest of the manifest pushed.
func (s Store) Push(ctx context.Context, im *Image, extra []string, ref string, o PushOptions) (string, error) {
	var nopts []name.Option
	if o.Insecure {
		nopts = append(nopts, name.Insecure)
	}
	r, err := name.ParseReference(strings.TrimSpace(ref), nopts...)
	if err != nil {
		return "", fmt.Errorf("%q is not an image reference: %w", ref, err)
	}
	var layers []v1.Layer
	for _, l := range im.Layers {
		d, err := v1.NewHash(l.Digest)
		if err != nil {
			return "", err
		}
		bl, err := partial.CompressedToLayer(&storedLayer{s: s, d: d, size: l.Size, mt: types.MediaType(l.MediaType)})
		if err != nil {
			return "", err
		}
		layers = append(layers, bl)
	}
	for _, e := range extra {
		d, err := v1.NewHash(e)
		if err != nil {
			return "", err
		}
		p := s.Path(d)
		if _, err := os.Stat(p); err != nil {
			return "", fmt.Errorf("layer %s is not in the content store: %w", e, err)
		}
		// Gzipped on the way: a provisioning layer is kept as a plain tar.
		l, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return os.Open(p) })
		if err != nil {
			return "", err
		}
		layers = append(layers, l)
	}
	img, err := mutate.AppendLayers(empty.Image, layers...)
	if err != nil {
		return "", err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return "", err
	}
	cf = cf.DeepCopy()
	p := Platform(o.Arch)
	cf.OS, cf.Architecture, cf.Variant = p.OS, p.Architecture, p.Variant
	cf.Config.Env, cf.Config.User, cf.Config.WorkingDir = im.Config.Env, o.User, im.Config.WorkingDir
	if img, err = mutate.ConfigFile(img, cf); err != nil {
		return "", err
	}
	kc := o.Keychain
	if kc == nil {
		kc = authn.DefaultKeychain
	}
	ropts := []remote.Option{remote.WithContext(ctx), remote.WithAuthFromKeychain(kc)}
	if o.Transport != nil {
		ropts = append(ropts, remote.WithTransport(o.Transport))
	}
	if err := remote.Write(r, img, ropts...); err != nil {
		return "", explain(r, err)
	}
	d, err := img.Digest()
	if err != nil {
		return "", err
	}
	return d.String(), nil
}
