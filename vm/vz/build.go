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
	cfg     *vz.VirtualMachineConfiguration
	objects []any
}

// keep keeps o referenced for the machine's life.
func (b *built) keep(o any) { b.objects = append(b.objects, o) }

// build makes the vz configuration c describes. It does not validate it.
func build(c vzconfig.Config) (*built, error) {
	b := &built{}
	if err := b.boot(c); err != nil {
		return nil, err
	}
	if err := b.platform(c.MachineIDPath); err != nil {
		return nil, err
	}
	if err := b.disks(c.Disks); err != nil {
		return nil, err
	}
	if err := b.shares(c.Shares); err != nil {
		return nil, err
	}
	if err := b.network(c); err != nil {
		return nil, err
	}
	if err := b.console(c.ConsoleLog); err != nil {
		return nil, err
	}
	if c.Entropy {
		if err := b.entropy(); err != nil {
			return nil, err
		}
	}
	if err := b.vsock(); err != nil {
		return nil, err
	}
	return b, nil
}

// boot makes the configuration: the Linux boot loader of c's kernel,
// initramfs and command line, with c's CPUs and memory.
func (b *built) boot(c vzconfig.Config) error {
	opts := []vz.LinuxBootLoaderOption{vz.WithCommandLine(c.Cmdline)}
	if c.Initrd != "" { // WithInitrd("") fails
		opts = append(opts, vz.WithInitrd(c.Initrd))
	}
	boot, err := vz.NewLinuxBootLoader(c.Kernel, opts...)
	if err != nil {
		return fmt.Errorf("boot loader: %w", err)
	}
	b.keep(boot)
	cfg, err := vz.NewVirtualMachineConfiguration(boot, c.CPUs, c.Memory)
	if err != nil {
		return fmt.Errorf("configuration: %w", err)
	}
	b.cfg = cfg
	return nil
}

// platform sets the generic platform with the machine identifier
// persisted at idPath (created there the first time): restoring saved
// state needs the identifier the state was saved with.
func (b *built) platform(idPath string) error {
	idData, err := vzconfig.LoadOrCreate(idPath, func() ([]byte, error) {
		id, err := vz.NewGenericMachineIdentifier()
		if err != nil {
			return nil, err
		}
		return id.DataRepresentation(), nil
	})
	if err != nil {
		return fmt.Errorf("machine identifier: %w", err)
	}
	id, err := vz.NewGenericMachineIdentifierWithData(idData)
	if err != nil {
		return fmt.Errorf("machine identifier %s: %w", idPath, err)
	}
	b.keep(id)
	platform, err := vz.NewGenericPlatformConfiguration(vz.WithGenericMachineIdentifier(id))
	if err != nil {
		return fmt.Errorf("platform: %w", err)
	}
	b.keep(platform)
	b.cfg.SetPlatformVirtualMachineConfiguration(platform)
	return nil
}

// disks sets a virtio-blk device for each disk image, in order.
func (b *built) disks(ds []vzconfig.Disk) error {
	var disks []vz.StorageDeviceConfiguration
	for _, d := range ds {
		att, err := vz.NewDiskImageStorageDeviceAttachmentWithCacheAndSync(d.Path, d.ReadOnly, caching(d.Caching), syncMode(d.Sync))
		if err != nil {
			return fmt.Errorf("disk %s: %w", d.Path, err)
		}
		b.keep(att)
		blk, err := vz.NewVirtioBlockDeviceConfiguration(att)
		if err != nil {
			return fmt.Errorf("disk %s: %w", d.Path, err)
		}
		b.keep(blk)
		disks = append(disks, blk)
	}
	b.cfg.SetStorageDevicesVirtualMachineConfiguration(disks)
	return nil
}

// shares sets a virtio-fs device for each share: one host directory
// under its tag.
func (b *built) shares(ss []vzconfig.Share) error {
	var shares []vz.DirectorySharingDeviceConfiguration
	for _, sh := range ss {
		dir, err := vz.NewSharedDirectory(sh.HostPath, sh.ReadOnly)
		if err != nil {
			return fmt.Errorf("share %s: %w", sh.Tag, err)
		}
		b.keep(dir)
		single, err := vz.NewSingleDirectoryShare(dir)
		if err != nil {
			return fmt.Errorf("share %s: %w", sh.Tag, err)
		}
		b.keep(single)
		dev, err := vz.NewVirtioFileSystemDeviceConfiguration(sh.Tag)
		if err != nil {
			return fmt.Errorf("share %s: %w", sh.Tag, err)
		}
		dev.SetDirectoryShare(single)
		b.keep(dev)
		shares = append(shares, dev)
	}
	b.cfg.SetDirectorySharingDevicesVirtualMachineConfiguration(shares)
	return nil
}

// network sets the network devices: one NAT device with the MAC address
// persisted at c.MACPath when c asks for NAT, none otherwise.
func (b *built) network(c vzconfig.Config) error {
	var nets []*vz.VirtioNetworkDeviceConfiguration
	if c.NAT {
		mac, err := vzconfig.LoadOrCreateMAC(c.MACPath, nil)
		if err != nil {
			return fmt.Errorf("network: %w", err)
		}
		nat, err := vz.NewNATNetworkDeviceAttachment()
		if err != nil {
			return fmt.Errorf("network: %w", err)
		}
		b.keep(nat)
		dev, err := vz.NewVirtioNetworkDeviceConfiguration(nat)
		if err != nil {
			return fmt.Errorf("network: %w", err)
		}
		addr, err := vz.NewMACAddress(mac)
		if err != nil {
			return fmt.Errorf("network: MAC %s: %w", mac, err)
		}
		b.keep(addr)
		dev.SetMACAddress(addr)
		b.keep(dev)
		nets = append(nets, dev)
	}
	b.cfg.SetNetworkDevicesVirtualMachineConfiguration(nets)
	return nil
}

// console sets the console: hvc0 to logFile, created (and truncated)
// here so it exists even before the guest writes.
func (b *built) console(logFile string) error {
	if f, err := os.OpenFile(logFile, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o644); err != nil {
		return fmt.Errorf("console log: %w", err)
	} else {
		f.Close()
	}
	att, err := vz.NewFileSerialPortAttachment(logFile, false)
	if err != nil {
		return fmt.Errorf("console log %s: %w", logFile, err)
	}
	b.keep(att)
	console, err := vz.NewVirtioConsoleDeviceSerialPortConfiguration(att)
	if err != nil {
		return fmt.Errorf("console: %w", err)
	}
	b.keep(console)
	b.cfg.SetSerialPortsVirtualMachineConfiguration([]*vz.VirtioConsoleDeviceSerialPortConfiguration{console})
	return nil
}

// entropy sets a virtio entropy device.
func (b *built) entropy() error {
	rng, err := vz.NewVirtioEntropyDeviceConfiguration()
	if err != nil {
		return fmt.Errorf("entropy: %w", err)
	}
	b.keep(rng)
	b.cfg.SetEntropyDevicesVirtualMachineConfiguration([]*vz.VirtioEntropyDeviceConfiguration{rng})
	return nil
}

// vsock sets the vsock device, exactly one: the framework allows no more.
func (b *built) vsock() error {
	sock, err := vz.NewVirtioSocketDeviceConfiguration()
	if err != nil {
		return fmt.Errorf("vsock: %w", err)
	}
	b.keep(sock)
	b.cfg.SetSocketDevicesVirtualMachineConfiguration([]vz.SocketDeviceConfiguration{sock})
	return nil
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
