package launch_test

import (
	"testing"

	"github.com/airlock-dev/airlock/guest"
	"github.com/airlock-dev/airlock/guest/agent"
	"github.com/airlock-dev/airlock/vm/image"
	"github.com/airlock-dev/airlock/vm/qemu"
)

// TestLinkContractAgrees: vm/qemu may not import the guest packages, so it
// keeps its own copies of the names it shares with the guest agent. They
// must agree.
func TestLinkContractAgrees(t *testing.T) {
	for _, c := range []struct{ name, qemu, guest string }{
		{"serial port name", qemu.SerialPortName, guest.SerialPortName},
		{"probe cmdline argument", qemu.ProbeCmdline, guest.ProbeArg},
		{"probe marker", qemu.ProbeMarker, guest.ProbeOK},
		{"module list (vm/image)", image.ModulesOrder, guest.ModulesOrder},
		{"Docker's module list (vm/image)", image.DockerModulesOrder, guest.DockerModulesOrder},
	} {
		if c.qemu != c.guest {
			t.Errorf("%s: vm/qemu says %q, the guest %q", c.name, c.qemu, c.guest)
		}
	}
}

// TestDockerModulesAgree: the guest's check names as missing any module
// of agent.DockerModulesNeeded it does not find, so each must be one the
// image builder puts in the initramfs (image.DockerModules).
func TestDockerModulesAgree(t *testing.T) {
	wanted := map[string]bool{}
	for _, m := range image.DockerModules() {
		wanted[m.Name] = true
	}
	for _, m := range agent.DockerModulesNeeded {
		if !wanted[m] {
			t.Errorf("the guest needs module %s for Docker, which image.DockerModules does not ask for", m)
		}
	}
}
