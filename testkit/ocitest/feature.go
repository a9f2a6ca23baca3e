package ocitest

import (
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/static"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// FeatureLayerType is a Dev Container feature's layer media type.
const FeatureLayerType = "application/vnd.devcontainers.layer.v1+tar"

// Feature is a Dev Container feature as its registry serves it: an OCI
// manifest whose config is "application/vnd.devcontainers" and whose one
// layer is the tar b (FeatureLayerType), as the features distribution
// spec has it.
func Feature(t testing.TB, b []byte) v1.Image {
	t.Helper()
	img := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	img = mutate.ConfigMediaType(img, "application/vnd.devcontainers")
	img, err := mutate.Append(img, mutate.Addendum{Layer: static.NewLayer(b, FeatureLayerType), MediaType: FeatureLayerType})
	if err != nil {
		t.Fatal(err)
	}
	return img
}
