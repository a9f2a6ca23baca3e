//go:build darwin

// Package bad misuses the vz API on purpose: darwincheck must reject it.
package bad

import (
	"github.com/Code-Hex/vz/v3"
)

func misuse(bl vz.BootLoader, mem int64) error {
	cfg, err := vz.NewVirtualMachineConfiguration(bl, 2, mem) // mem is int64, not uint64
	if err != nil {
		return err
	}
	att, err := vz.NewDiskImageStorageDeviceAttachmentWithCacheAndSync("disk.img", false,
		vz.DiskImageSynchronizationModeFsync, vz.DiskImageCachingModeCached) // modes swapped
	if err != nil {
		return err
	}
	_ = att
	v, err := vz.NewVirtualMachine(cfg)
	if err != nil {
		return err
	}
	ok := v.RequestStop() // returns (bool, error)
	_ = ok
	return v.SaveMachineStateToFile("state") // no such method
}
