// Package pipeline runs a sandbox: a run (snapshot, boot, fill
// /workspace, run the command with live output and a transcript,
// collect what changed, verify), a reply round on a reviewed sandbox,
// a fan-out of attempts from one baseline, and a kept VM's checkpoints
// and rollback. It owns the session and its workspace per sync mode (a
// copy onto the VM's disk, or a virtio-fs staging clone), the machine
// adapter over app/machine/launch, transfers, the workspace disk, the sandbox's
// network (the egress proxy, its control socket) and typed progress
// events. It records everything in app/sandbox's store and prints
// nothing itself.
//
// It must not import fyne, a hypervisor package (vm/qemu, vm/vz: the
// machine is booted through a function it is handed), app/cli or
// app/gui.
package pipeline
