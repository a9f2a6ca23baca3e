package agent

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestShareMounts(t *testing.T) {
	tests := []struct {
		cmdline string
		want    []shareMount
		bad     []string
	}{
		{cmdline: "console=ttyS0 panic=-1", want: nil},
		{cmdline: "quiet airlock.virtiofs=workspace:/workspace airlock.debug",
			want: []shareMount{{Tag: "workspace", Dir: "/workspace"}}},
		{cmdline: "airlock.virtiofs=a:/mnt/a airlock.virtiofs=b.2:/srv/b",
			want: []shareMount{{Tag: "a", Dir: "/mnt/a"}, {Tag: "b.2", Dir: "/srv/b"}}},
		{cmdline: "airlock.virtiofs=:/x airlock.virtiofs=t airlock.virtiofs=t:rel airlock.virtiofs=t:/a/../b airlock.virtiofs=t:/ " +
			"airlock.virtiofs=0123456789012345678901234567890123456:/x airlock.virtiofsx=t:/y",
			bad: []string{"airlock.virtiofs=:/x", "airlock.virtiofs=t", "airlock.virtiofs=t:rel", "airlock.virtiofs=t:/a/../b", "airlock.virtiofs=t:/",
				"airlock.virtiofs=0123456789012345678901234567890123456:/x"}},
	}
	for _, tt := range tests {
		got, bad := shareMounts(tt.cmdline)
		if diff := cmp.Diff(tt.want, got); diff != "" {
			t.Errorf("shareMounts(%q) mounts (-want +got):\n%s", tt.cmdline, diff)
		}
		if diff := cmp.Diff(tt.bad, bad); diff != "" {
			t.Errorf("shareMounts(%q) bad (-want +got):\n%s", tt.cmdline, diff)
		}
	}
}

func TestDiskMounts(t *testing.T) {
	tests := []struct {
		cmdline string
		want    []diskMount
		bad     []string
	}{
		{cmdline: "console=ttyS0 airlock.virtiofs=w:/workspace"},
		{cmdline: "airlock.disk=vda:/workspace airlock.debug", want: []diskMount{{Dev: "vda", Dir: "/workspace"}}},
		{cmdline: "airlock.disk=/dev/vda:/w airlock.disk=../vda:/w airlock.disk=vda airlock.disk=vda:rel airlock.disk=vda:/ airlock.disk=:/w",
			bad: []string{"airlock.disk=/dev/vda:/w", "airlock.disk=../vda:/w", "airlock.disk=vda", "airlock.disk=vda:rel", "airlock.disk=vda:/", "airlock.disk=:/w"}},
		{cmdline: "airlock.disk=vdc:/workspace:vdb", want: []diskMount{{Dev: "vdc", Dir: "/workspace", Lower: "vdb"}}},
		{cmdline: "airlock.disk=vdc:/workspace: airlock.disk=vdc:/w:vdc airlock.disk=vdc:/w:../vdb airlock.disk=vdc:/run/airlock/overlay/x:vdb airlock.disk=vdc:/w:vdb:x/y",
			bad: []string{"airlock.disk=vdc:/workspace:", "airlock.disk=vdc:/w:vdc", "airlock.disk=vdc:/w:../vdb", "airlock.disk=vdc:/run/airlock/overlay/x:vdb", "airlock.disk=vdc:/w:vdb:x/y"}},
		{cmdline: "airlock.disk=vdd:/workspace:vdb:vdc", want: []diskMount{{Dev: "vdd", Dir: "/workspace", Lower: "vdb", Delta: "vdc"}}},
		{cmdline: "airlock.disk=vdd:/w:vdb:vdb airlock.disk=vdd:/w:vdb:vdd airlock.disk=vdd:/w:vdb: airlock.disk=vdd:/w:vdb:vdc:vde airlock.disk=vdd:/w::vdc",
			bad: []string{"airlock.disk=vdd:/w:vdb:vdb", "airlock.disk=vdd:/w:vdb:vdd", "airlock.disk=vdd:/w:vdb:", "airlock.disk=vdd:/w:vdb:vdc:vde", "airlock.disk=vdd:/w::vdc"}},
	}
	for _, tt := range tests {
		got, bad := diskMounts(tt.cmdline)
		if diff := cmp.Diff(tt.want, got); diff != "" {
			t.Errorf("diskMounts(%q) mounts (-want +got):\n%s", tt.cmdline, diff)
		}
		if diff := cmp.Diff(tt.bad, bad); diff != "" {
			t.Errorf("diskMounts(%q) bad (-want +got):\n%s", tt.cmdline, diff)
		}
	}
}

func TestNetMode(t *testing.T) {
	for cmdline, want := range map[string]string{"": "", "quiet airlock.net=dhcp": "dhcp", "airlock.netx=dhcp": ""} {
		if got := netMode(cmdline); got != want {
			t.Errorf("netMode(%q) = %q, want %q", cmdline, got, want)
		}
	}
}

func TestRootDevice(t *testing.T) {
	tests := []struct{ cmdline, dev, bad string }{
		{"console=ttyS0 panic=-1", "", ""},
		{"airlock.root=vda quiet", "vda", ""},
		{"airlock.root=../sda", "", "airlock.root=../sda"},
		{"airlock.root=", "", "airlock.root="},
		{"airlock.rootx=vda", "", ""},
	}
	for _, tt := range tests {
		dev, bad := rootDevice(tt.cmdline)
		if dev != tt.dev || bad != tt.bad {
			t.Errorf("rootDevice(%q) = %q, %q; want %q, %q", tt.cmdline, dev, bad, tt.dev, tt.bad)
		}
	}
}
