package qemu

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/airlock-dev/airlock/vm"
)

func TestArgs(t *testing.T) {
	base := vm.Spec{Name: "t1", Kernel: "/img/vmlinux", Initrd: "/img/initrd", Cmdline: "panic=-1 quiet", StateDir: "/s"}
	tcg := Host{Accel: TCG, Arch: vm.AMD64, OS: "linux", QBoot: "/usr/share/qemu/qboot.rom"}
	common := func(cpus, mem string) []string {
		return []string{"-smp", cpus, "-m", mem, "-nodefaults", "-no-user-config", "-nographic", "-no-reboot", "-sandbox", Sandbox}
	}
	serial := []string{"-device", "virtio-serial-pci",
		"-chardev", "socket,id=link,fd=4,server=on,wait=off",
		"-device", "virtserialport,chardev=link,name=airlock.link"}
	cat := func(parts ...[]string) []string {
		var out []string
		for _, p := range parts {
			out = append(out, p...)
		}
		return out
	}
	tests := []struct {
		name string
		spec vm.Spec
		host Host
		want []string
	}{
		{
			name: "amd64 tcg serial qboot",
			spec: base.WithDefaults(vm.AMD64),
			host: tcg,
			want: cat(
				[]string{"qemu-system-x86_64", "-machine", "q35,memory-backend=mem", "-bios", "/usr/share/qemu/qboot.rom", "-accel", "tcg", "-cpu", "max"},
				common("1", "512"),
				[]string{"-object", "memory-backend-ram,id=mem,size=512M"},
				[]string{"-name", "guest=airlock-t1",
					"-kernel", "/img/vmlinux", "-initrd", "/img/initrd", "-append", "console=ttyS0 no_timer_check panic=-1 quiet",
					"-chardev", "file,id=console,path=/dev/fd/5", "-serial", "chardev:console",
					"-chardev", "socket,id=qmp,fd=3,server=on,wait=off", "-mon", "chardev=qmp,mode=control",
					"-nic", "none", "-device", "virtio-rng-pci"},
				serial),
		},
		{
			name: "amd64 kvm vsock nat disks seabios",
			spec: vm.Spec{Name: "a,b=c", Arch: vm.AMD64, Kernel: "/k", CPUs: 2, MemoryMiB: 1024,
				Network: vm.NetworkNAT, StateDir: "/s", ConsoleLog: "/logs/c,1.log",
				Link:  vm.Link{Port: 2222},
				Disks: []vm.Disk{{Path: "/d/root.img", ReadOnly: true}, {Path: "/d/work.qcow2", Format: "qcow2"}}},
			host: Host{Accel: KVM, Arch: vm.AMD64, OS: "linux", Vsock: true, CID: 42},
			want: cat(
				[]string{"qemu-system-x86_64", "-machine", "q35,memory-backend=mem", "-accel", "kvm", "-cpu", "host"},
				common("2", "1024"),
				[]string{"-object", "memory-backend-ram,id=mem,size=1024M"},
				[]string{"-name", "guest=airlock-a,,b=c",
					"-kernel", "/k", "-append", "console=ttyS0 no_timer_check",
					"-chardev", "file,id=console,path=/dev/fd/5", "-serial", "chardev:console",
					"-chardev", "socket,id=qmp,fd=3,server=on,wait=off", "-mon", "chardev=qmp,mode=control",
					"-netdev", "user,id=net0", "-device", "virtio-net-pci,netdev=net0",
					"-device", "virtio-rng-pci",
					"-drive", "if=none,id=disk0,format=raw,file=/d/root.img,readonly=on", "-device", "virtio-blk-pci,drive=disk0",
					"-drive", "if=none,id=disk1,format=qcow2,file=/d/work.qcow2", "-device", "virtio-blk-pci,drive=disk1",
					"-device", "vhost-vsock-pci,guest-cid=42"}),
		},
		{
			// What airlock run --open-network gives: NAT, and the sandbox's
			// own raw disk for /workspace.
			name: "amd64 tcg open network and workspace disk",
			spec: vm.Spec{Name: "sb", Arch: vm.AMD64, Kernel: "/k", CPUs: 2, MemoryMiB: 2048, Network: vm.NetworkNAT, StateDir: "/s",
				Cmdline: "airlock.net=dhcp airlock.disk=vda:/workspace", Disks: []vm.Disk{{Path: "/h/sandboxes/sb/disk.img", Format: "raw"}}},
			host: tcg,
			want: cat(
				[]string{"qemu-system-x86_64", "-machine", "q35,memory-backend=mem", "-bios", "/usr/share/qemu/qboot.rom", "-accel", "tcg", "-cpu", "max"},
				common("2", "2048"),
				[]string{"-object", "memory-backend-ram,id=mem,size=2048M"},
				[]string{"-name", "guest=airlock-sb",
					"-kernel", "/k", "-append", "console=ttyS0 no_timer_check airlock.net=dhcp airlock.disk=vda:/workspace",
					"-chardev", "file,id=console,path=/dev/fd/5", "-serial", "chardev:console",
					"-chardev", "socket,id=qmp,fd=3,server=on,wait=off", "-mon", "chardev=qmp,mode=control",
					"-netdev", "user,id=net0", "-device", "virtio-net-pci,netdev=net0",
					"-device", "virtio-rng-pci",
					"-drive", "if=none,id=disk0,format=raw,file=/h/sandboxes/sb/disk.img", "-device", "virtio-blk-pci,drive=disk0"},
				serial),
		},
		{
			name: "serial link asked for on a vsock host",
			spec: vm.Spec{Arch: vm.AMD64, Kernel: "/k", StateDir: "/s", Link: vm.Link{Kind: vm.LinkSerial, SocketPath: "/run/l.sock"}},
			host: Host{Accel: TCG, Arch: vm.AMD64, OS: "linux", Vsock: true, CID: 9},
			want: cat(
				[]string{"qemu-system-x86_64", "-machine", "q35,memory-backend=mem", "-accel", "tcg", "-cpu", "max"},
				common("1", "512"),
				[]string{"-object", "memory-backend-ram,id=mem,size=512M"},
				[]string{"-kernel", "/k", "-append", "console=ttyS0 no_timer_check",
					"-chardev", "file,id=console,path=/dev/fd/5", "-serial", "chardev:console",
					"-chardev", "socket,id=qmp,fd=3,server=on,wait=off", "-mon", "chardev=qmp,mode=control",
					"-nic", "none", "-device", "virtio-rng-pci"},
				serial),
		},
		{
			name: "arm64 tcg on amd64 ignores qboot",
			spec: vm.Spec{Arch: vm.ARM64, Kernel: "/Image", Cmdline: "panic=-1", StateDir: "/s"},
			host: tcg,
			want: cat(
				[]string{"qemu-system-aarch64", "-machine", "virt,gic-version=3,memory-backend=mem", "-accel", "tcg", "-cpu", "max"},
				common("1", "512"),
				[]string{"-object", "memory-backend-ram,id=mem,size=512M"},
				[]string{"-kernel", "/Image", "-append", "console=ttyAMA0 panic=-1",
					"-chardev", "file,id=console,path=/dev/fd/5", "-serial", "chardev:console",
					"-chardev", "socket,id=qmp,fd=3,server=on,wait=off", "-mon", "chardev=qmp,mode=control",
					"-nic", "none", "-device", "virtio-rng-pci"},
				serial),
		},
		{
			name: "arm64 kvm",
			spec: vm.Spec{Arch: vm.ARM64, Kernel: "/Image", StateDir: "/s", Link: vm.Link{Kind: vm.LinkVsock, Port: 1}},
			host: Host{Accel: KVM, Arch: vm.ARM64, OS: "linux", Vsock: true, CID: 3},
			want: cat(
				[]string{"qemu-system-aarch64", "-machine", "virt,gic-version=host,memory-backend=mem", "-accel", "kvm", "-cpu", "host"},
				common("1", "512"),
				[]string{"-object", "memory-backend-ram,id=mem,size=512M"},
				[]string{"-kernel", "/Image", "-append", "console=ttyAMA0",
					"-chardev", "file,id=console,path=/dev/fd/5", "-serial", "chardev:console",
					"-chardev", "socket,id=qmp,fd=3,server=on,wait=off", "-mon", "chardev=qmp,mode=control",
					"-nic", "none", "-device", "virtio-rng-pci",
					"-device", "vhost-vsock-pci,guest-cid=3"}),
		},
		{
			name: "amd64 tcg serial one virtiofs share",
			spec: vm.Spec{Arch: vm.AMD64, Kernel: "/k", StateDir: "/s", MemoryMiB: 768,
				Shares: []vm.Share{{Tag: "workspace", HostPath: "/sb/staging"}}},
			host: tcg,
			want: cat(
				[]string{"qemu-system-x86_64", "-machine", "q35,memory-backend=mem", "-bios", "/usr/share/qemu/qboot.rom", "-accel", "tcg", "-cpu", "max"},
				common("1", "768"),
				[]string{"-object", "memory-backend-memfd,id=mem,size=768M,share=on",
					"-kernel", "/k", "-append", "console=ttyS0 no_timer_check",
					"-chardev", "file,id=console,path=/dev/fd/5", "-serial", "chardev:console",
					"-chardev", "socket,id=qmp,fd=3,server=on,wait=off", "-mon", "chardev=qmp,mode=control",
					"-nic", "none", "-device", "virtio-rng-pci",
					"-chardev", "socket,id=fs0,path=/s/fs0.sock", "-device", "vhost-user-fs-pci,chardev=fs0,tag=workspace"},
				serial),
		},
		{
			name: "arm64 kvm vsock two shares after the disks",
			spec: vm.Spec{Arch: vm.ARM64, Kernel: "/Image", StateDir: "/s,t", Link: vm.Link{Port: 1},
				Disks:  []vm.Disk{{Path: "/d/root.img"}},
				Shares: []vm.Share{{Tag: "a", HostPath: "/x"}, {Tag: "b.2", HostPath: "/y"}}},
			host: Host{Accel: KVM, Arch: vm.ARM64, OS: "linux", Vsock: true, CID: 3},
			want: cat(
				[]string{"qemu-system-aarch64", "-machine", "virt,gic-version=host,memory-backend=mem", "-accel", "kvm", "-cpu", "host"},
				common("1", "512"),
				[]string{"-object", "memory-backend-memfd,id=mem,size=512M,share=on",
					"-kernel", "/Image", "-append", "console=ttyAMA0",
					"-chardev", "file,id=console,path=/dev/fd/5", "-serial", "chardev:console",
					"-chardev", "socket,id=qmp,fd=3,server=on,wait=off", "-mon", "chardev=qmp,mode=control",
					"-nic", "none", "-device", "virtio-rng-pci",
					"-drive", "if=none,id=disk0,format=raw,file=/d/root.img", "-device", "virtio-blk-pci,drive=disk0",
					"-chardev", "socket,id=fs0,path=/s,,t/fs0.sock", "-device", "vhost-user-fs-pci,chardev=fs0,tag=a",
					"-chardev", "socket,id=fs1,path=/s,,t/fs1.sock", "-device", "vhost-user-fs-pci,chardev=fs1,tag=b.2",
					"-device", "vhost-vsock-pci,guest-cid=3"}),
		},
		{
			// A booted machine's RAM is a memfd the backend hands QEMU,
			// so that Save can copy it out.
			name: "amd64 tcg shared RAM",
			spec: vm.Spec{Arch: vm.AMD64, Kernel: "/k", StateDir: "/s", MemoryMiB: 2048},
			host: Host{Accel: TCG, Arch: vm.AMD64, OS: "linux", Memory: Memory{Shared: true}},
			want: cat(
				[]string{"qemu-system-x86_64", "-machine", "q35,memory-backend=mem", "-accel", "tcg", "-cpu", "max"},
				common("1", "2048"),
				[]string{"-object", "memory-backend-file,id=mem,size=2048M,mem-path=/dev/fd/6,share=on",
					"-kernel", "/k", "-append", "console=ttyS0 no_timer_check",
					"-chardev", "file,id=console,path=/dev/fd/5", "-serial", "chardev:console",
					"-chardev", "socket,id=qmp,fd=3,server=on,wait=off", "-mon", "chardev=qmp,mode=control",
					"-nic", "none", "-device", "virtio-rng-pci"},
				serial),
		},
		{
			// A restored machine maps its saved RAM file private.
			name: "amd64 tcg RAM file",
			spec: vm.Spec{Arch: vm.AMD64, Kernel: "/k", StateDir: "/s"},
			host: Host{Accel: TCG, Arch: vm.AMD64, OS: "linux", Memory: Memory{File: "/warm/a,b/state.ram"}},
			want: cat(
				[]string{"qemu-system-x86_64", "-machine", "q35,memory-backend=mem", "-accel", "tcg", "-cpu", "max"},
				common("1", "512"),
				[]string{"-object", "memory-backend-file,id=mem,size=512M,mem-path=/warm/a,,b/state.ram,share=off",
					"-kernel", "/k", "-append", "console=ttyS0 no_timer_check",
					"-chardev", "file,id=console,path=/dev/fd/5", "-serial", "chardev:console",
					"-chardev", "socket,id=qmp,fd=3,server=on,wait=off", "-mon", "chardev=qmp,mode=control",
					"-nic", "none", "-device", "virtio-rng-pci"},
				serial),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Args(tt.spec, tt.host)
			if err != nil {
				t.Fatalf("Args: %v", err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Args (-want +got):\n%s", diff)
			}
		})
	}
}

func TestArgsErrors(t *testing.T) {
	long := "/" + strings.Repeat("d", 110)
	ok := vm.Spec{Arch: vm.AMD64, Kernel: "/k", StateDir: "/s"}
	tcg := Host{Accel: TCG, Arch: vm.AMD64, OS: "linux"}
	tests := []struct {
		name     string
		spec     func(vm.Spec) vm.Spec
		host     func(Host) Host
		contains []string
		is       error
	}{
		{name: "RAM file and shared RAM", host: func(h Host) Host { h.Memory = Memory{File: "/r", Shared: true}; return h },
			contains: []string{"RAM file", "cannot share"}},
		{name: "RAM file and a share", spec: func(s vm.Spec) vm.Spec { s.Shares = []vm.Share{{Tag: "w", HostPath: "/w"}}; return s },
			host: func(h Host) Host { h.Memory = Memory{File: "/r"}; return h }, contains: []string{"RAM file"}},
		{name: "vsock without vhost-vsock", spec: func(s vm.Spec) vm.Spec { s.Link = vm.Link{Kind: vm.LinkVsock, Port: 1}; return s },
			contains: []string{"/dev/vhost-vsock"}, is: vm.ErrNotSupported},
		{name: "qmp socket too long", spec: func(s vm.Spec) vm.Spec { s.StateDir = long; return s },
			contains: []string{"qmp socket path", "107-byte", "shorter state dir"}},
		{name: "link socket too long on darwin", spec: func(s vm.Spec) vm.Spec { s.Link.SocketPath = long[:104]; return s },
			host: func(h Host) Host { h.OS = "darwin"; return h }, contains: []string{"serial link socket path", "103-byte"}},
		{name: "kvm cross arch", spec: func(s vm.Spec) vm.Spec { s.Arch = vm.ARM64; return s },
			host: func(h Host) Host { h.Accel = KVM; return h }, contains: []string{"kvm cannot run a arm64 guest"}},
		{name: "unknown arch", spec: func(s vm.Spec) vm.Spec { s.Arch = "riscv64"; return s },
			contains: []string{"riscv64"}, is: vm.ErrNotSupported},
		{name: "share socket too long", spec: func(s vm.Spec) vm.Spec {
			s.StateDir = long[:100]
			s.Shares = []vm.Share{{Tag: "workspace", HostPath: "/x"}}
			return s
		}, contains: []string{"virtiofs share workspace socket path", "107-byte"}},
		{name: "read-only share", spec: func(s vm.Spec) vm.Spec {
			s.Shares = []vm.Share{{Tag: "ro", HostPath: "/x", ReadOnly: true}}
			return s
		}, contains: []string{"share 0 (ro): read-only shares"}, is: vm.ErrNotSupported},
		{name: "no accel", host: func(h Host) Host { h.Accel = ""; return h }, contains: []string{"want kvm or tcg"}},
		{name: "vsock no port no cid",
			spec:     func(s vm.Spec) vm.Spec { s.Link.Kind = vm.LinkVsock; return s },
			host:     func(h Host) Host { h.Vsock = true; return h },
			contains: []string{"no guest port", "cid 0"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, h := ok, tcg
			if tt.spec != nil {
				s = tt.spec(s)
			}
			if tt.host != nil {
				h = tt.host(h)
			}
			_, err := Args(s, h)
			if err == nil {
				t.Fatal("Args: no error")
			}
			for _, c := range tt.contains {
				if !strings.Contains(err.Error(), c) {
					t.Errorf("error %q does not mention %q", err, c)
				}
			}
			if tt.is != nil && !errors.Is(err, tt.is) {
				t.Errorf("error %q is not %v", err, tt.is)
			}
		})
	}
}
