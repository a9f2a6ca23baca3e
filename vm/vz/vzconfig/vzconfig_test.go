package vzconfig

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/airlock-dev/airlock/vm"
)

var testHost = Host{Arch: vm.ARM64, Limits: Limits{MinCPUs: 1, MaxCPUs: 8, MinMemory: 128 * MiB, MaxMemory: 16 << 30}}

func baseSpec() vm.Spec {
	return vm.Spec{
		Name:     "t",
		Kernel:   "/img/Image",
		Initrd:   "/img/initrd",
		Cmdline:  "quiet panic=-1",
		Link:     vm.Link{Kind: vm.LinkVsock, Port: 1024},
		StateDir: "/run/m",
	}
}

func TestTranslate(t *testing.T) {
	base := Config{
		Kernel:        "/img/Image",
		Initrd:        "/img/initrd",
		Cmdline:       "quiet panic=-1 console=hvc0",
		CPUs:          1,
		Memory:        512 * MiB,
		MachineIDPath: "/run/m/vz-machine-id",
		ConsoleLog:    "/run/m/console.log",
		Entropy:       true,
		VsockPort:     1024,
	}
	tests := []struct {
		name string
		edit func(*vm.Spec)
		host Host
		want func(*Config)
	}{
		{"defaults", func(*vm.Spec) {}, testHost, func(*Config) {}},
		{"auto link is vsock", func(s *vm.Spec) { s.Link.Kind = vm.LinkAuto }, testHost, func(*Config) {}},
		{"no cmdline", func(s *vm.Spec) { s.Cmdline = "" }, testHost, func(c *Config) { c.Cmdline = "console=hvc0" }},
		{"no initrd", func(s *vm.Spec) { s.Initrd = "" }, testHost, func(c *Config) { c.Initrd = "" }},
		{"console log", func(s *vm.Spec) { s.ConsoleLog = "/logs/c" }, testHost, func(c *Config) { c.ConsoleLog = "/logs/c" }},
		{"cpus within", func(s *vm.Spec) { s.CPUs = 4 }, testHost, func(c *Config) { c.CPUs = 4 }},
		{"cpus clamped to max", func(s *vm.Spec) { s.CPUs = 64 }, testHost, func(c *Config) {
			c.CPUs = 8
			c.Notes = []string{"cpus: 64 is more than this Mac allows, using 8"}
		}},
		{"cpus clamped to min", func(*vm.Spec) {}, Host{Arch: vm.ARM64, Limits: Limits{MinCPUs: 2, MaxCPUs: 8}}, func(c *Config) {
			c.CPUs = 2
			c.Notes = []string{"cpus: 1 is below this Mac's minimum, using 2"}
		}},
		{"no limits known", func(s *vm.Spec) { s.CPUs, s.MemoryMiB = 99, 1<<20 }, Host{Arch: vm.ARM64}, func(c *Config) {
			c.CPUs, c.Memory = 99, 1<<20*MiB
		}},
		{"memory clamped to min, rounded up to a MiB", func(s *vm.Spec) { s.MemoryMiB = 64 },
			Host{Arch: vm.ARM64, Limits: Limits{MinMemory: 100*MiB + 1}}, func(c *Config) {
				c.Memory = 101 * MiB
				c.Notes = []string{"memory: 64 MiB is below this Mac's minimum, using 101 MiB"}
			}},
		{"memory clamped to max, rounded down to a MiB", func(s *vm.Spec) { s.MemoryMiB = 1 << 20 },
			Host{Arch: vm.ARM64, Limits: Limits{MaxMemory: 8<<30 + 12345}}, func(c *Config) {
				c.Memory = 8 << 30
				c.Notes = []string{"memory: 1048576 MiB is more than this Mac allows, using 8192 MiB"}
			}},
		{"disks raw, cached, fsync", func(s *vm.Spec) {
			s.Disks = []vm.Disk{{Path: "/d/root.img"}, {Path: "/d/ro.img", ReadOnly: true, Format: "raw"}}
		}, testHost, func(c *Config) {
			c.Disks = []Disk{
				{Path: "/d/root.img", Caching: CachingCached, Sync: SyncFsync},
				{Path: "/d/ro.img", ReadOnly: true, Caching: CachingCached, Sync: SyncFsync},
			}
		}},
		{"shares", func(s *vm.Spec) {
			s.Shares = []vm.Share{{Tag: "work", HostPath: "/stage"}, {Tag: strings.Repeat("t", 35), HostPath: "/ro", ReadOnly: true}}
		}, testHost, func(c *Config) {
			c.Shares = []Share{{Tag: "work", HostPath: "/stage"}, {Tag: strings.Repeat("t", 35), HostPath: "/ro", ReadOnly: true}}
		}},
		{"nat with persisted mac", func(s *vm.Spec) { s.Network = vm.NetworkNAT }, testHost, func(c *Config) {
			c.NAT, c.MACPath = true, "/run/m/vz-mac"
		}},
		{"network none", func(s *vm.Spec) { s.Network = vm.NetworkNone }, testHost, func(*Config) {}},
		{"open network and a workspace disk, as airlock run gives them", func(s *vm.Spec) {
			s.Network = vm.NetworkNAT
			s.Cmdline += " airlock.net=dhcp airlock.disk=vda:/workspace"
			s.Disks = []vm.Disk{{Path: "/sb/disk.img", Format: "raw"}}
		}, testHost, func(c *Config) {
			c.NAT, c.MACPath = true, "/run/m/vz-mac"
			c.Cmdline = strings.Replace(c.Cmdline, " console=hvc0", " airlock.net=dhcp airlock.disk=vda:/workspace console=hvc0", 1)
			c.Disks = []Disk{{Path: "/sb/disk.img", Caching: CachingCached, Sync: SyncFsync}}
		}},
		{"amd64 on an Intel Mac", func(s *vm.Spec) { s.Arch = vm.AMD64 }, Host{Arch: vm.AMD64}, func(*Config) {}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := baseSpec()
			tt.edit(&s)
			want := base
			tt.want(&want)
			got, err := Translate(s, tt.host)
			if err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(want, got); d != "" {
				t.Errorf("Translate (-want +got):\n%s", d)
			}
			if got.Memory%MiB != 0 {
				t.Errorf("memory %d is not a multiple of 1 MiB", got.Memory)
			}
		})
	}
}

func TestTranslateErrors(t *testing.T) {
	tests := []struct {
		name        string
		edit        func(*vm.Spec)
		wants       []string
		unsupported bool
	}{
		{"other arch", func(s *vm.Spec) { s.Arch = vm.AMD64 }, []string{"amd64 guest on this arm64 Mac", "host's architecture only"}, true},
		{"serial link", func(s *vm.Spec) { s.Link.Kind = vm.LinkSerial }, []string{"serial link", "use the vsock link"}, true},
		{"no port", func(s *vm.Spec) { s.Link.Port = 0 }, []string{"needs a port"}, false},
		{"qcow2", func(s *vm.Spec) { s.Disks = []vm.Disk{{Path: "/d.qcow2", Format: "qcow2"}} }, []string{"raw images only", "qemu-img convert"}, true},
		{"tag too long", func(s *vm.Spec) { s.Shares = []vm.Share{{Tag: strings.Repeat("t", 36), HostPath: "/x"}} }, []string{"tag", "1 to 35"}, false},
		{"spec invalid", func(s *vm.Spec) { s.Kernel, s.StateDir = "", "" }, []string{"no kernel", "no state dir"}, false},
		{"every problem at once", func(s *vm.Spec) {
			s.Arch = vm.AMD64
			s.Link.Kind = vm.LinkSerial
			s.Disks = []vm.Disk{{Path: "/d.qcow2", Format: "qcow2"}}
		}, []string{"amd64 guest", "serial link", "raw images only"}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := baseSpec()
			tt.edit(&s)
			_, err := Translate(s, testHost)
			if err == nil {
				t.Fatal("Translate succeeded")
			}
			for _, w := range tt.wants {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
			if got := errors.Is(err, vm.ErrNotSupported); got != tt.unsupported {
				t.Errorf("errors.Is(err, vm.ErrNotSupported) = %v, want %v (%v)", got, tt.unsupported, err)
			}
		})
	}
}
