// Package images makes guest images in builder VMs: Provision boots a
// builder from an image made from an OCI image, runs setup steps in it
// as root through the egress proxy, and keeps what they changed as an OCI
// layer on top of the base's.
//
// It boots the builder through app/launch and serves its network with
// app/pipeline's (GuestMachine, StartNetwork), the same proxy a run has;
// app/pipeline must not import it. It must not import fyne, a
// hypervisor package (vm/qemu, vm/vz: the backend is handed in), app/plan,
// app/cli or app/gui.
package images
