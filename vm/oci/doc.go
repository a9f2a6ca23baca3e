// Package oci pulls OCI and Docker images for the guest's platform into a
// content store on the host, and turns an image's layers into an ext4 disk
// the guest boots: in pure Go, without root, the same code on macOS and
// Linux.
//
// go-containerregistry resolves references, authenticates (the user's
// docker config and credential helpers), picks the platform out of an
// index and verifies every blob's digest. Layers are kept once in the
// store, by digest, and shared between images. The layers are applied in
// order with OCI whiteouts (mutate.Extract) and written by hcsshim's
// tar2ext4 as a compact ext4 image that the guest mounts read-only, under
// an overlay whose upper layer is the sandbox's own disk.
//
// It is the host's side of images: it must not import app, guest, sync,
// review, the hypervisor packages (vm/qemu, vm/vz), fyne or vz.
package oci
