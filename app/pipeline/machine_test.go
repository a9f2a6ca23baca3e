package pipeline

import (
	"testing"

	"github.com/airlock-dev/airlock/app/machine/launch"
	"github.com/airlock-dev/airlock/vm"
)

// TestMountsChecked: the guest's mount table is read unless the first
// contact mounted every disk and there is no share to check.
func TestMountsChecked(t *testing.T) {
	disk := []launch.Disk{{Path: "disk.img", Mount: "/workspace", Lower: "base.img", Delta: "delta.img"}}
	share := []launch.Share{{Share: vm.Share{Tag: "ws"}, Mount: "/workspace"}}
	for _, c := range []struct {
		name    string
		mounted bool // launch.Guest.DisksMounted
		a       Attach
		want    bool
	}{
		{"nothing to mount", false, Attach{}, true},
		{"disks mounted at first contact", true, Attach{Disks: disk}, true},
		{"disks on the kernel command line", false, Attach{Disks: disk}, false},
		{"a share", false, Attach{Shares: share}, false},
		{"a share beside disks mounted at first contact", true, Attach{Disks: disk, Shares: share}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := mountsChecked(&launch.Guest{DisksMounted: c.mounted}, c.a); got != c.want {
				t.Errorf("mountsChecked = %v, want %v", got, c.want)
			}
		})
	}
}
