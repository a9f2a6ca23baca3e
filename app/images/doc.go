// Package images gets the guest images that Airlock does not build from
// Debian packages on the host (vm/image does those): a Source pulls OCI
// images (Pull), makes images in builder VMs (Build, whose Provision
// boots a builder from an image made from an OCI image, runs setup steps
// in it as root through the egress proxy and keeps what they changed as
// an OCI layer), fetches the agent image, published or built here in two
// stages (EnsureAgents, BuildAgents, AgentsRef), and makes a project's
// environment an image, after the user's confirmation of its setup, with
// the agent layer stacked on it for agent presets (Environment). Its
// fields are what it takes from the host: the home and image roots, a
// backend, the builders' size, the agents repository, output and notes;
// app/plan's Planner holds one and calls it while it plans, and the
// image and env commands call it directly.
//
// It boots builders through app/machine/launch and serves their network with
// app/pipeline's (GuestMachine, StartNetwork), the same proxy a run has;
// app/pipeline must not import it. It must not import fyne, a
// hypervisor package (vm/qemu, vm/vz: the backend is handed in),
// app/plan, app/cli or app/gui.
package images
