//go:build darwin && cgo && arm64

package vz

import (
	"github.com/Code-Hex/vz/v3"

	"github.com/airlock-dev/airlock/vm/vz/vzconfig"
)

// Rosetta says whether Rosetta for Linux can be shared into arm64 guests
// on this Mac. vz answers "not supported" below macOS 13 without calling
// the framework, so this is safe on every macOS.
func Rosetta() vzconfig.RosettaState {
	switch vz.LinuxRosettaDirectoryShareAvailability() {
	case vz.LinuxRosettaAvailabilityInstalled:
		return vzconfig.RosettaInstalled
	case vz.LinuxRosettaAvailabilityNotInstalled:
		return vzconfig.RosettaNotInstalled
	}
	return vzconfig.RosettaNotSupported
}
