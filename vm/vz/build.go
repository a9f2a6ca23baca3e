//go:build darwin && cgo

package vz

import (
	"fmt"
	"os"

	"github.com/Code-Hex/vz/v3"

	"github.com/airlock-dev/airlock/vm/vz/vzconfig"
)

// built is a vz configuration and every object it was made of. The
// framework's objects are released by Go finalizers, so the machine keeps
// all of them referenced for its whole life. No *os.File is handed to the
// framework (the console attachment takes a path); one that ever is must
// be kept here too: vz v3.7.1 does not dup it, so its finalizer would
// close the descriptor under the running VM.
type built struct {
	cfg  *vz.VirtualMachineConfiguration
	keep []any
}

// build makes the vz configuration c describes. It does not validate it.
func build(c vzconfig.Config) (*built, error) {
	b := &built{}
	keep := func(o any) { b.keep = append(b.keep, o) }

	opts := []vz.LinuxBootLoaderOption{vz.WithCommandLine(c.Cmdline)}
	if c.Initrd != "" { // WithInitrd("") fails
		opts = append(opts, vz.WithInitrd(c.Initrd))
	}
	boot, err := vz.NewLinuxBootLoader(c.Kernel, opts...)
	if err != nil {
		return nil, fmt.Errorf("boot loader: %w", err)
	}
	keep(boot)
	cfg, err := vz.NewVirtualMachineConfiguration(boot, c.CPUs, c.Memory)
	if err != nil {
		return nil, fmt.Errorf("configuration: %w", err)
	}
	b.cfg = cfg

	// The generic platform with a persisted machine identifier: restoring
	// saved state needs the identifier the state was saved with.
	idData, err := vzconfig.LoadOrCreate(c.MachineIDPath, func() ([]byte, error) {
		id, err := vz.NewGenericMachineIdentifier()
		if err != nil {
			return nil, err
		}
		return id.DataRepresentation(), nil
	})
	if err != nil {
		return nil, fmt.Errorf("machine identifier: %w", err)
	}
	id, err := vz.NewGenericMachineIdentifierWithData(idData)
	if err != nil {
		return nil, fmt.Errorf("machine identifier %s: %w", c.MachineIDPath, err)
	}
	keep(id)
	platform, err := vz.NewGenericPlatformConfiguration(vz.WithGenericMachineIdentifier(id))
	if err != nil {
		return nil, fmt.Errorf("platform: %w", err)
	}
	keep(platform)
	cfg.SetPlatformVirtualMachineConfiguration(platform)

	var disks []vz.StorageDeviceConfiguration
	for _, d := range c.Disks {
		att, err := vz.NewDiskImageStorageDeviceAttachmentWithCacheAndSync(d.Path, d.ReadOnly, caching(d.Caching), syncMode(d.Sync))
		if err != nil {
			return nil, fmt.Errorf("disk %s: %w", d.Path, err)
		}
		keep(att)
		blk, err := vz.NewVirtioBlockDeviceConfiguration(att)
		if err != nil {
			return nil, fmt.Errorf("disk %s: %w", d.Path, err)
		}
		keep(blk)
		disks = append(disks, blk)
	}
	cfg.SetStorageDevicesVirtualMachineConfiguration(disks)

	var shares []vz.DirectorySharingDeviceConfiguration
	for _, sh := range c.Shares {
		dir, err := vz.NewSharedDirectory(sh.HostPath, sh.ReadOnly)
		if err != nil {
			return nil, fmt.Errorf("share %s: %w", sh.Tag, err)
		}
		keep(dir)
		single, err := vz.NewSingleDirectoryShare(dir)
		if err != nil {
			return nil, fmt.Errorf("share %s: %w", sh.Tag, err)
		}
		keep(single)
		dev, err := vz.NewVirtioFileSystemDeviceConfiguration(sh.Tag)
		if err != nil {
			return nil, fmt.Errorf("share %s: %w", sh.Tag, err)
		}
		dev.SetDirectoryShare(single)
		keep(dev)
		shares = append(shares, dev)
	}
	cfg.SetDirectorySharingDevicesVirtualMachineConfiguration(shares)

	var nets []*vz.VirtioNetworkDeviceConfiguration
	if c.NAT {
		mac, err := vzconfig.LoadOrCreateMAC(c.MACPath, nil)
		if err != nil {
			return nil, fmt.Errorf("network: %w", err)
		}
		nat, err := vz.NewNATNetworkDeviceAttachment()
		if err != nil {
			return nil, fmt.Errorf("network: %w", err)
		}
		keep(nat)
		dev, err := vz.NewVirtioNetworkDeviceConfiguration(nat)
		if err != nil {
			return nil, fmt.Errorf("network: %w", err)
		}
		addr, err := vz.NewMACAddress(mac)
		if err != nil {
			return nil, fmt.Errorf("network: MAC %s: %w", mac, err)
		}
		keep(addr)
		dev.SetMACAddress(addr)
		keep(dev)
		nets = append(nets, dev)
	}
	cfg.SetNetworkDevicesVirtualMachineConfiguration(nets)

	// The console: hvc0 to the log file, created (and truncated) here so it
	// exists even before the guest writes.
	if f, err := os.OpenFile(c.ConsoleLog, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o644); err != nil {
		return nil, fmt.Errorf("console log: %w", err)
	} else {
		f.Close()
	}
	consoleAtt, err := vz.NewFileSerialPortAttachment(c.ConsoleLog, false)
	if err != nil {
		return nil, fmt.Errorf("console log %s: %w", c.ConsoleLog, err)
	}
	keep(consoleAtt)
	console, err := vz.NewVirtioConsoleDeviceSerialPortConfiguration(consoleAtt)
	if err != nil {
		return nil, fmt.Errorf("console: %w", err)
	}
	keep(console)
	cfg.SetSerialPortsVirtualMachineConfiguration([]*vz.VirtioConsoleDeviceSerialPortConfiguration{console})

	if c.Entropy {
		rng, err := vz.NewVirtioEntropyDeviceConfiguration()
		if err != nil {
			return nil, fmt.Errorf("entropy: %w", err)
		}
		keep(rng)
		cfg.SetEntropyDevicesVirtualMachineConfiguration([]*vz.VirtioEntropyDeviceConfiguration{rng})
	}

	// Exactly one vsock device: the framework allows no more.
	sock, err := vz.NewVirtioSocketDeviceConfiguration()
	if err != nil {
		return nil, fmt.Errorf("vsock: %w", err)
	}
	keep(sock)
	cfg.SetSocketDevicesVirtualMachineConfiguration([]vz.SocketDeviceConfiguration{sock})
	return b, nil
}

func caching(c vzconfig.Caching) vz.DiskImageCachingMode {
	if c == vzconfig.CachingCached {
		return vz.DiskImageCachingModeCached
	}
	return vz.DiskImageCachingModeAutomatic
}

func syncMode(s vzconfig.Sync) vz.DiskImageSynchronizationMode {
	if s == vzconfig.SyncFsync {
		return vz.DiskImageSynchronizationModeFsync
	}
	return vz.DiskImageSynchronizationModeFull
}
