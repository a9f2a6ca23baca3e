package testenv

import (
	"slices"
	"testing"
)

func TestParseRequire(t *testing.T) {
	all := Capabilities
	tests := []struct {
		spec string
		want []Capability
	}{
		{"", nil},
		{"kvm", []Capability{KVM}},
		{"qemu, qemu-img,virtiofsd", []Capability{QEMU, QEMUImg, Virtiofsd}},
		{"all", all},
		{"all,-kvm,-nonroot", slices.DeleteFunc(slices.Clone(all), func(c Capability) bool { return c == KVM || c == NonRoot })},
	}
	for _, tt := range tests {
		if got := parseRequire(tt.spec); !slices.Equal(got, tt.want) {
			t.Errorf("parseRequire(%q) = %q, want %q", tt.spec, got, tt.want)
		}
	}
}

func TestRequired(t *testing.T) {
	t.Setenv(RequireEnv, "all,-kvm")
	if Required(KVM) || !Required(QEMU) {
		t.Errorf("with %s=all,-kvm: kvm required %v, qemu required %v", RequireEnv, Required(KVM), Required(QEMU))
	}
}
