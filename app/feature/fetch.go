package feature

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

// maxManifest is the largest manifest a feature's registry may send.
const maxManifest = 1 << 20

// FetchOptions are how Fetch reaches a registry.
type FetchOptions struct {
	// Keychain gives registry credentials (nil: anonymous).
	Keychain authn.Keychain
	// Transport replaces the default HTTP transport (tests).
	Transport http.RoundTripper
}

// Fetch gets the feature ref names from its registry (ghcr.io for the
// Dev Container project's own) and checks it (Read). A registry is
// reached over HTTPS, save a loopback one, which go-containerregistry
// reaches over plain HTTP as it does for an image pull. Only call it for
// a feature the user confirmed: it reaches the network.
func Fetch(ctx context.Context, ref string, o FetchOptions) (*Artifact, error) {
	r, err := name.ParseReference(strings.TrimSpace(ref))
	if err != nil {
		return nil, fmt.Errorf("feature %q is not an OCI reference: %w", ref, err)
	}
	kc := o.Keychain
	if kc == nil {
		kc = authn.NewMultiKeychain() // anonymous
	}
	ropts := []remote.Option{remote.WithContext(ctx), remote.WithAuthFromKeychain(kc)}
	if o.Transport != nil {
		ropts = append(ropts, remote.WithTransport(o.Transport))
	}
	desc, err := remote.Get(r, ropts...)
	if err != nil {
		return nil, fmt.Errorf("fetch feature %s: %w", ref, err)
	}
	if len(desc.Manifest) > maxManifest {
		return nil, fmt.Errorf("feature %s: its manifest is over %d KiB", ref, maxManifest>>10)
	}
	img, err := desc.Image()
	if err != nil {
		return nil, fmt.Errorf("feature %s: not a feature's manifest: %w", ref, err)
	}
	m, err := img.Manifest()
	if err != nil {
		return nil, fmt.Errorf("feature %s: %w", ref, err)
	}
	var layer *struct {
		size int64
		i    int
	}
	for i, l := range m.Layers {
		if string(l.MediaType) == LayerMediaType {
			if layer != nil {
				return nil, fmt.Errorf("feature %s has more than one %s layer", ref, LayerMediaType)
			}
			layer = &struct {
				size int64
				i    int
			}{l.Size, i}
		}
	}
	if layer == nil {
		return nil, fmt.Errorf("feature %s has no %s layer: is it a Dev Container feature?", ref, LayerMediaType)
	}
	if layer.size < 0 || layer.size > MaxLayer {
		return nil, fmt.Errorf("feature %s: its layer is %d bytes, over the %d MiB a feature may be", ref, layer.size, MaxLayer>>20)
	}
	ls, err := img.Layers()
	if err != nil {
		return nil, fmt.Errorf("feature %s: %w", ref, err)
	}
	// The layer's digest is checked as it is read (go-containerregistry
	// verifies a remote blob against its descriptor).
	rc, err := ls[layer.i].Compressed()
	if err != nil {
		return nil, fmt.Errorf("feature %s: %w", ref, err)
	}
	defer rc.Close()
	data, err := io.ReadAll(io.LimitReader(rc, MaxLayer+1))
	if err != nil {
		return nil, fmt.Errorf("feature %s: read its layer: %w", ref, err)
	}
	if int64(len(data)) != layer.size {
		return nil, fmt.Errorf("feature %s: its layer is not the %d bytes its manifest says", ref, layer.size)
	}
	files, meta, err := Read(data)
	if err != nil {
		return nil, fmt.Errorf("feature %s: %w", ref, err)
	}
	return &Artifact{Ref: ref, Digest: desc.Digest.String(), Meta: *meta, Files: files}, nil
}
