package oci

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strings"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/remote/transport"

	"github.com/airlock-dev/airlock/vm"
)

// Errors a pull wraps, for callers that act on the kind of failure.
var (
	// ErrNotFound: the registry has no such repository, tag or digest.
	ErrNotFound = errors.New("image not found")
	// ErrDenied: the registry refused the credentials, or asked for some.
	ErrDenied = errors.New("registry refused access")
	// ErrPlatform: the image has no variant for the guest's platform.
	ErrPlatform = errors.New("no variant for the guest's platform")
)

// PullOptions says how to pull.
type PullOptions struct {
	// Arch is the guest's architecture: the image's linux/<arch> variant
	// is pulled.
	Arch vm.Arch
	// Keychain finds credentials for a registry; nil is the user's
	// (docker's config.json and its credential helpers).
	Keychain authn.Keychain
	// Insecure lets the reference name a registry served over plain HTTP
	// (a registry on loopback).
	Insecure bool
	// Transport carries the requests; nil is http.DefaultTransport.
	Transport http.RoundTripper
	// Progress, when set, is told how the pull goes: before the first
	// layer, as bytes arrive, and when it is done.
	Progress func(Progress)
}

// Progress is how far a pull is.
type Progress struct {
	Layers, LayersDone int
	// Bytes is what the layers not yet in the store weigh; BytesDone how
	// much of it has arrived.
	Bytes, BytesDone int64
}

func (p Progress) String() string {
	if p.Bytes == 0 && p.LayersDone == p.Layers {
		return fmt.Sprintf("all %d layers already here", p.Layers)
	}
	return fmt.Sprintf("pulling %d/%d layers, %s/%s", p.LayersDone, p.Layers, mb(p.BytesDone), mb(p.Bytes))
}

func mb(n int64) string {
	return fmt.Sprintf("%.0f MB", float64(n)/1e6)
}

// Image is a pulled image as the store records it.
type Image struct {
	// Ref is the reference as asked for; Name the full reference it
	// resolved to (index.docker.io/library/debian:bookworm-slim).
	Ref  string `toml:"ref" json:"ref"`
	Name string `toml:"name" json:"name"`
	// Digest is the digest of the platform's manifest: pulling
	// Name@Digest gives the same image.
	Digest string `toml:"digest" json:"digest"`
	// Platform is os/arch[/variant] of the image pulled.
	Platform string  `toml:"platform" json:"platform"`
	Layers   []Layer `toml:"layers" json:"layers"`
	Config   Config  `toml:"config" json:"config"`
}

// Layer is one of an image's layers, bottom first, kept in the store by
// Digest (of its compressed bytes).
type Layer struct {
	Digest    string `toml:"digest" json:"digest"`
	Size      int64  `toml:"size" json:"size"`
	MediaType string `toml:"media_type" json:"media_type"`
}

// Config is what the image's configuration says about running it.
type Config struct {
	Env        []string `toml:"env,omitempty" json:"env,omitempty"`
	User       string   `toml:"user,omitempty" json:"user,omitempty"`
	WorkingDir string   `toml:"working_dir,omitempty" json:"working_dir,omitempty"`
}

// Size is the sum of the layers' compressed sizes.
func (im *Image) Size() int64 {
	var n int64
	for _, l := range im.Layers {
		n += l.Size
	}
	return n
}

// Platform is the OCI platform of a guest architecture.
func Platform(arch vm.Arch) v1.Platform {
	p := v1.Platform{OS: "linux", Architecture: string(arch)}
	if arch == vm.ARM64 {
		p.Variant = "v8"
	}
	return p
}

// Pull fetches the image ref names for the guest's platform into the
// store: its manifest, configuration and every layer not there yet, each
// verified against its digest.
func (s Store) Pull(ctx context.Context, ref string, o PullOptions) (*Image, error) {
	var nopts []name.Option
	if o.Insecure {
		nopts = append(nopts, name.Insecure)
	}
	r, err := name.ParseReference(strings.TrimSpace(ref), nopts...)
	if err != nil {
		return nil, fmt.Errorf("%q is not an image reference (want [REGISTRY/]REPOSITORY[:TAG|@sha256:DIGEST], as docker pull takes): %w", ref, err)
	}
	kc := o.Keychain
	if kc == nil {
		kc = authn.DefaultKeychain
	}
	want := Platform(o.Arch)
	ropts := []remote.Option{remote.WithContext(ctx), remote.WithAuthFromKeychain(kc), remote.WithPlatform(want)}
	if o.Transport != nil {
		ropts = append(ropts, remote.WithTransport(o.Transport))
	}
	desc, err := remote.Get(r, ropts...)
	if err != nil {
		return nil, explain(r, err)
	}
	img, err := pickPlatform(r, desc, want)
	if err != nil {
		return nil, err
	}
	return s.fetch(r, ref, img, o.Progress)
}

// pickPlatform is the image for platform want: the descriptor itself when
// it is an image made for it, or its variant in an index.
func pickPlatform(r name.Reference, desc *remote.Descriptor, want v1.Platform) (v1.Image, error) {
	if desc.MediaType.IsIndex() {
		idx, err := desc.ImageIndex()
		if err != nil {
			return nil, explain(r, err)
		}
		m, err := idx.IndexManifest()
		if err != nil {
			return nil, explain(r, err)
		}
		var have []string
		for _, d := range m.Manifests {
			if d.Platform == nil {
				continue
			}
			if d.Platform.Satisfies(want) || (d.Platform.OS == want.OS && d.Platform.Architecture == want.Architecture && d.Platform.Variant == "") {
				img, err := idx.Image(d.Digest)
				if err != nil {
					return nil, explain(r, err)
				}
				return img, nil
			}
			if d.Platform.OS != "unknown" { // attestations
				have = append(have, d.Platform.String())
			}
		}
		slices.Sort(have)
		return nil, fmt.Errorf("%s has no variant for %s (it has %s): Airlock's guest is %s; pick an image built for it: %w",
			r, want.String(), strings.Join(slices.Compact(have), ", "), want.String(), ErrPlatform)
	}
	img, err := desc.Image()
	if err != nil {
		return nil, explain(r, err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, explain(r, err)
	}
	if cf.OS != "" && (cf.OS != want.OS || cf.Architecture != want.Architecture) {
		return nil, fmt.Errorf("%s is made for %s/%s only; Airlock's guest is %s: pick an image built for it: %w",
			r, cf.OS, cf.Architecture, want.String(), ErrPlatform)
	}
	return img, nil
}

// fetch keeps img's blobs in the store and returns its record.
func (s Store) fetch(r name.Reference, ref string, img v1.Image, progress func(Progress)) (*Image, error) {
	digest, err := img.Digest()
	if err != nil {
		return nil, explain(r, err)
	}
	raw, err := img.RawManifest()
	if err != nil {
		return nil, explain(r, err)
	}
	if err := s.Put(digest, int64(len(raw)), strings.NewReader(string(raw))); err != nil {
		return nil, err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, explain(r, err)
	}
	rawCfg, err := img.RawConfigFile()
	if err != nil {
		return nil, explain(r, err)
	}
	cfgDigest, err := img.ConfigName()
	if err != nil {
		return nil, explain(r, err)
	}
	if err := s.Put(cfgDigest, int64(len(rawCfg)), strings.NewReader(string(rawCfg))); err != nil {
		return nil, err
	}
	layers, err := img.Layers()
	if err != nil {
		return nil, explain(r, err)
	}
	out := &Image{Ref: ref, Name: r.Context().Name() + refSuffix(r), Digest: digest.String(),
		Platform: platformOf(cf), Config: Config{Env: cf.Config.Env, User: cf.Config.User, WorkingDir: cf.Config.WorkingDir}}
	var p Progress
	p.Layers = len(layers)
	var missing []v1.Layer
	for _, l := range layers {
		d, err := l.Digest()
		if err != nil {
			return nil, explain(r, err)
		}
		size, err := l.Size()
		if err != nil {
			return nil, explain(r, err)
		}
		mt, err := l.MediaType()
		if err != nil {
			return nil, explain(r, err)
		}
		out.Layers = append(out.Layers, Layer{Digest: d.String(), Size: size, MediaType: string(mt)})
		if s.Has(d) {
			p.LayersDone++
			continue
		}
		missing = append(missing, l)
		p.Bytes += size
	}
	report := func() {
		if progress != nil {
			progress(p)
		}
	}
	report()
	for _, l := range missing {
		d, _ := l.Digest()
		size, _ := l.Size()
		rc, err := l.Compressed()
		if err != nil {
			return nil, explain(r, err)
		}
		cr := &countingReader{r: rc, add: func(n int64) { p.BytesDone += n; report() }}
		err = s.Put(d, size, cr)
		rc.Close()
		if err != nil {
			return nil, explain(r, err)
		}
		p.LayersDone++
		report()
	}
	return out, nil
}

func refSuffix(r name.Reference) string {
	if d, ok := r.(name.Digest); ok {
		return "@" + d.DigestStr()
	}
	return ":" + r.Identifier()
}

func platformOf(cf *v1.ConfigFile) string {
	p := cf.OS + "/" + cf.Architecture
	if cf.Variant != "" {
		p += "/" + cf.Variant
	}
	return p
}

// countingReader reports what it reads, at most every 1 MiB.
type countingReader struct {
	r       io.Reader
	add     func(int64)
	pending int64
}

func (c *countingReader) Read(b []byte) (int, error) {
	n, err := c.r.Read(b)
	c.pending += int64(n)
	if c.pending >= 1<<20 || (err != nil && c.pending > 0) {
		c.add(c.pending)
		c.pending = 0
	}
	return n, err
}

// explain turns a registry's error into one that says what happened and
// what to do.
func explain(r name.Reference, err error) error {
	reg := r.Context().RegistryStr()
	var te *transport.Error
	if errors.As(err, &te) {
		codes := map[transport.ErrorCode]bool{}
		for _, d := range te.Errors {
			codes[d.Code] = true
		}
		switch {
		case te.StatusCode == http.StatusNotFound || codes[transport.ManifestUnknownErrorCode] || codes[transport.NameUnknownErrorCode]:
			return fmt.Errorf("%s: %s has no such image; check the repository and tag (docker pull %s would fail too): %w", r, reg, r, ErrNotFound)
		case te.StatusCode == http.StatusUnauthorized || te.StatusCode == http.StatusForbidden ||
			codes[transport.UnauthorizedErrorCode] || codes[transport.DeniedErrorCode]:
			return fmt.Errorf("%s: %s refused access (HTTP %d); sign in with `docker login %s` (Airlock uses docker's credentials and credential helpers), or check that the repository exists: %w",
				r, reg, te.StatusCode, reg, ErrDenied)
		}
		return fmt.Errorf("%s: the registry %s answered HTTP %d: %v", r, reg, te.StatusCode, te)
	}
	var ne net.Error
	var oe *net.OpError
	if errors.As(err, &oe) || errors.As(err, &ne) {
		return fmt.Errorf("%s: cannot reach the registry %s (%v); check the network, or use an image already pulled (airlock image ls)", r, reg, err)
	}
	return fmt.Errorf("%s: %w", r, err)
}
