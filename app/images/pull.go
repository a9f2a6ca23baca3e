package images

import (
	"context"
	"fmt"

	"github.com/airlock-dev/airlock/app/home"
	"github.com/airlock-dev/airlock/vm"
	"github.com/airlock-dev/airlock/vm/image"
	"github.com/airlock-dev/airlock/vm/oci"
)

// PullRequest asks for an OCI image made a guest image.
type PullRequest struct {
	// Ref is the reference; Name the guest image to make; Arch the
	// guest's (empty: the Source's).
	Ref, Name, Arch string
	// Insecure allows a registry served over plain HTTP.
	Insecure bool
	// Progress receives each step and the download's progress.
	Progress func(string)
}

// Pull fetches an OCI image for the guest's platform into the content
// store and makes it a guest image (image.FromOCI), booted by the minimal
// image. An image without glibc is noted: its own commands run, the
// agent CLIs do not.
func (src *Source) Pull(ctx context.Context, req PullRequest) (*image.Image, error) {
	arch := vm.Arch(src.arch(req.Arch))
	progress := req.Progress
	if progress == nil {
		progress = func(string) {}
	}
	boot, err := image.Find(src.imageRoots(), image.DefaultName, arch)
	if err != nil {
		return nil, fmt.Errorf("the minimal image boots pulled images: %w", err)
	}
	store := oci.Store{Dir: home.Layout{Root: src.Home}.OCI()}
	progress("pulling " + req.Ref + " for linux/" + string(arch))
	pulled, err := store.Pull(ctx, req.Ref, oci.PullOptions{Arch: arch, Insecure: req.Insecure,
		Progress: func(p oci.Progress) { progress(p.String()) }})
	if err != nil {
		return nil, err
	}
	progress("writing " + req.Ref + " as a disk")
	im, err := image.FromOCI(ctx, src.Home, image.OCIOptions{Name: req.Name, Boot: boot, Store: store, Image: pulled, Label: "pulled " + req.Ref})
	if err != nil {
		return nil, err
	}
	if libc := im.Meta.OCI.Libc; libc != "glibc" {
		src.note("warning: %s has no glibc loader (%s): commands of its own run, but the agent CLIs Airlock adds need glibc; use a Debian- or Ubuntu-based image for them", pulled.Name, orNone(libc))
	}
	return im, nil
}
