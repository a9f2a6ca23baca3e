#!/bin/sh
# mk-test-initrd.sh BUSYBOX MODULES_DIR OUT.cpio
#
# Builds the busybox initramfs the vm/qemu real-VM tests boot: a static
# busybox at /bin/busybox plus the modules the tests' /init scripts load
# (virtio_ring, virtio, virtio_pci*, virtio_console, button, evdev), copied
# from MODULES_DIR (a /lib/modules/<release> tree of the test kernel). The
# tests append their own /init to it. Until the image builder provides
# these, e.g. for Debian's 6.1 cloud kernel:
#
#   apt-get download linux-image-6.1.0-56-cloud-amd64 busybox-static
#   dpkg-deb -x linux-image-*.deb x; dpkg-deb -x busybox-static*.deb bb
#   ./mk-test-initrd.sh bb/bin/busybox x/lib/modules/6.1.0-56-cloud-amd64 base.cpio
#   # amd64 needs the uncompressed PVH vmlinux: scripts/extract-vmlinux
#   # from the kernel tree turns x/boot/vmlinuz-* into one; arm64's
#   # vmlinuz is already an uncompressed Image.
#   AIRLOCK_TEST_KERNEL=$PWD/vmlinux AIRLOCK_TEST_INITRD=$PWD/base.cpio go test ./vm/qemu/
set -eu
busybox=$1 mods=$2 out=$3
release=$(basename "$mods")
d=$(mktemp -d)
trap 'rm -rf "$d"' EXIT
mkdir -p "$d/bin" "$d/dev" "$d/proc" "$d/sys"
cp "$busybox" "$d/bin/busybox"
for m in virtio_ring virtio virtio_pci_legacy_dev virtio_pci_modern_dev virtio_pci virtio_console button evdev; do
  for f in $(find "$mods/kernel" -name "$m.ko*"); do
    rel=${f#"$mods"/}
    mkdir -p "$d/lib/modules/$release/$(dirname "$rel")"
    cp "$f" "$d/lib/modules/$release/$rel"
  done
done
printf '#!/bin/busybox sh\n/bin/busybox echo HELLO-INIT\n/bin/busybox poweroff -f\n' > "$d/init"
chmod +x "$d/init"
(cd "$d" && find . | cpio -o -H newc --quiet) > "$out"
