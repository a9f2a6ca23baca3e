//go:build darwin

// Package arm64only calls a vz API that exists in darwin/arm64 builds only,
// without the build tag that should say so: it passes darwincheck for arm64
// and fails it for amd64.
package arm64only

import "github.com/Code-Hex/vz/v3"

func save(v *vz.VirtualMachine) error {
	return v.SaveMachineStateToPath("state")
}
