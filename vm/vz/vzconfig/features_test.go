package vzconfig

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/airlock-dev/airlock/vm"
)

func TestFeatures(t *testing.T) {
	allowed := func(v OSVersion, arch vm.Arch) []bool {
		var out []bool
		for _, f := range Features(v, arch) {
			out = append(out, f.Allowed)
			if !f.Allowed && f.Needs == "" {
				t.Errorf("%s on macOS %s %s: not allowed and no reason", f.Name, v, arch)
			}
		}
		return out
	}
	// Order: VMs, virtio-fs, save/restore, Rosetta, nested.
	for _, tt := range []struct {
		v    OSVersion
		arch vm.Arch
		want []bool
	}{
		{OSVersion{12, 6, 0}, vm.ARM64, []bool{false, false, false, false, false}},
		{OSVersion{13, 0, 0}, vm.ARM64, []bool{true, true, false, true, false}},
		{OSVersion{14, 0, 0}, vm.ARM64, []bool{true, true, true, true, false}},
		{OSVersion{14, 5, 0}, vm.AMD64, []bool{true, true, false, false, false}},
		{OSVersion{15, 1, 0}, vm.ARM64, []bool{true, true, true, true, true}},
		{OSVersion{26, 0, 0}, vm.AMD64, []bool{true, true, false, false, false}},
	} {
		if diff := cmp.Diff(tt.want, allowed(tt.v, tt.arch)); diff != "" {
			t.Errorf("macOS %s %s (-want +got):\n%s", tt.v, tt.arch, diff)
		}
	}
	save := Features(OSVersion{13, 6, 0}, vm.AMD64)[2]
	if want := "a Mac with Apple silicon and macOS 14.0 or later (this Mac runs 13.6)"; save.Needs != want {
		t.Errorf("save on an Intel Mac with 13.6 needs %q, want %q", save.Needs, want)
	}
}

func TestRosettaState(t *testing.T) {
	for r, want := range map[RosettaState]string{
		RosettaInstalled:    "installed",
		RosettaNotInstalled: "not installed (install it with: softwareupdate --install-rosetta --agree-to-license)",
		RosettaState(7):     "RosettaState(7)",
	} {
		if got := r.String(); got != want {
			t.Errorf("%d: %q, want %q", int(r), got, want)
		}
	}
}

func TestCheckSaveRestore(t *testing.T) {
	for _, tt := range []struct {
		v      OSVersion
		arch   vm.Arch
		shares int
		want   string // "" for allowed
	}{
		{OSVersion{14, 0, 0}, vm.ARM64, 0, ""},
		{OSVersion{15, 2, 0}, vm.ARM64, 0, ""},
		{OSVersion{13, 6, 0}, vm.ARM64, 0, "needs macOS 14.0 or later, this Mac runs 13.6"},
		{OSVersion{14, 0, 0}, vm.AMD64, 0, "needs a Mac with Apple silicon"},
		{OSVersion{14, 0, 0}, vm.ARM64, 1, "virtio-fs"},
	} {
		err := CheckSaveRestore(tt.v, tt.arch, tt.shares)
		switch {
		case tt.want == "" && err != nil:
			t.Errorf("%s %s %d shares: %v, want allowed", tt.v, tt.arch, tt.shares, err)
		case tt.want != "" && (err == nil || !errors.Is(err, vm.ErrNotSupported) || !strings.Contains(err.Error(), tt.want)):
			t.Errorf("%s %s %d shares: %v, want ErrNotSupported saying %q", tt.v, tt.arch, tt.shares, err, tt.want)
		}
	}
}
