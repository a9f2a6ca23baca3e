// Package image owns Airlock's guest images: the image store under
// Airlock's home directory, where an image lives at
// images/<name>/<arch>/ as kernel, initrd and image.toml, and the builder
// of the minimal image from Debian packages (fetched with the host's apt):
// an uncompressed kernel (a PVH vmlinux on amd64, an arm64 Image) and a
// reproducible newc initramfs holding the airlock-guest agent as /init,
// a static busybox and the kernel modules the agent loads, in dependency
// order, from /lib/modules/airlock/modules.order.
//
// It must not import the guest packages (the guest binary is handed in as
// a file), app, sync, review, fyne or vz: it is plain data and files,
// usable from the CLI, the GUI and tests alike.
package image
