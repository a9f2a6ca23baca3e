package image

import (
	"slices"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/google/go-cmp/cmp"

	"github.com/airlock-dev/airlock/vm"
)

// fakeKernelTree is an extracted kernel package with modules named by
// their file, each with the given dependencies, and modules.builtin.
func fakeKernelTree(t *testing.T, mods map[string][]string, builtin ...string) fstest.MapFS {
	t.Helper()
	const root = "lib/modules/6.1.0-99-cloud-amd64/"
	fsys := fstest.MapFS{}
	for file, deps := range mods {
		name := strings.TrimSuffix(file[strings.LastIndex(file, "/")+1:], ".ko")
		fsys[root+"kernel/"+file] = &fstest.MapFile{Data: testModule(t,
			"license=GPL", "depends="+strings.Join(deps, ","), "intree=Y", "name="+modName(name), "vermagic=6.1.0-99-cloud-amd64 SMP")}
	}
	var b strings.Builder
	for _, m := range builtin {
		b.WriteString("kernel/" + m + "\n")
	}
	fsys[root+"modules.builtin"] = &fstest.MapFile{Data: []byte(b.String())}
	fsys["boot/config-6.1.0-99-cloud-amd64"] = &fstest.MapFile{Data: []byte("CONFIG_EXT4_FS=y\n")}
	return fsys
}

// cloudTree looks like Debian's cloud kernel: 9p is not configured at all,
// ext4 and rng-core are built in, virtio-rng has a dash in its file name.
func cloudTree(t *testing.T) fstest.MapFS {
	return fakeKernelTree(t, map[string][]string{
		"drivers/virtio/virtio_ring.ko":                      nil,
		"drivers/virtio/virtio.ko":                           {"virtio_ring"},
		"drivers/virtio/virtio_pci_legacy_dev.ko":            nil,
		"drivers/virtio/virtio_pci_modern_dev.ko":            nil,
		"drivers/virtio/virtio_pci.ko":                       {"virtio_pci_modern_dev", "virtio", "virtio_ring", "virtio_pci_legacy_dev"},
		"drivers/virtio/virtio_mmio.ko":                      {"virtio", "virtio_ring"},
		"drivers/char/virtio_console.ko":                     {"virtio", "virtio_ring"},
		"drivers/block/virtio_blk.ko":                        {"virtio", "virtio_ring"},
		"drivers/net/virtio_net.ko":                          {"net_failover", "virtio", "virtio_ring"},
		"drivers/net/net_failover.ko":                        {"failover"},
		"net/core/failover.ko":                               nil,
		"drivers/char/hw_random/virtio-rng.ko":               {"virtio", "virtio_ring"},
		"net/vmw_vsock/vsock.ko":                             nil,
		"net/vmw_vsock/vmw_vsock_virtio_transport_common.ko": {"vsock"},
		"net/vmw_vsock/vmw_vsock_virtio_transport.ko":        {"virtio", "vmw_vsock_virtio_transport_common", "virtio_ring", "vsock"},
		"fs/fuse/fuse.ko":                                    nil,
		"fs/fuse/virtiofs.ko":                                {"fuse", "virtio", "virtio_ring"},
		"fs/overlayfs/overlay.ko":                            nil,
		"drivers/input/evdev.ko":                             nil,
		"drivers/acpi/button.ko":                             nil,
		"net/unrelated.ko":                                   {"vsock"},
		"net/llc/llc.ko":                                     nil,
		"net/802/stp.ko":                                     {"llc"},
		"net/bridge/bridge.ko":                               {"stp", "llc"},
		"net/bridge/br_netfilter.ko":                         {"bridge"},
		"drivers/net/veth.ko":                                nil,
	}, "fs/ext4/ext4.ko", "drivers/char/hw_random/rng-core.ko")
}

func names(ms []*kmod) []string {
	var out []string
	for _, m := range ms {
		out = append(out, m.name)
	}
	return out
}

func TestResolveMinimalModules(t *testing.T) {
	km, err := scanModules(cloudTree(t))
	if err != nil {
		t.Fatal(err)
	}
	if km.release != "6.1.0-99-cloud-amd64" {
		t.Errorf("release %q", km.release)
	}
	sel, err := resolveModules(km, MinimalModules(vm.AMD64))
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"virtio_ring", "virtio", "virtio_pci_legacy_dev", "virtio_pci_modern_dev", "virtio_pci",
		"virtio_console", "virtio_blk", "overlay", "failover", "net_failover", "virtio_net",
		"vsock", "vmw_vsock_virtio_transport_common", "vmw_vsock_virtio_transport",
		"virtio_rng", "fuse", "virtiofs", "evdev", "button",
	}
	if diff := cmp.Diff(want, names(sel.order)); diff != "" {
		t.Errorf("load order (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"9pnet_virtio", "9p"}, sel.missing); diff != "" {
		t.Errorf("missing (-want +got):\n%s", diff)
	}
	if !slices.Equal(sel.builtin, []string{"ext4"}) {
		t.Errorf("builtin %v, want ext4", sel.builtin)
	}
	checkOrder(t, sel.order)
	// The file name has a dash, the module name an underscore.
	for _, m := range sel.order {
		if m.name == "virtio_rng" && !strings.HasSuffix(m.path, "virtio-rng.ko") {
			t.Errorf("virtio_rng at %s", m.path)
		}
	}
}

// checkOrder checks that every module comes after all its dependencies.
func checkOrder(t *testing.T, order []*kmod) {
	t.Helper()
	seen := map[string]bool{}
	for _, m := range order {
		for _, d := range m.depends {
			if !seen[d] {
				t.Errorf("%s is loaded before its dependency %s", m.name, d)
			}
		}
		if seen[m.name] {
			t.Errorf("%s is listed twice", m.name)
		}
		seen[m.name] = true
	}
}

func TestResolveBuiltinAndMissing(t *testing.T) {
	fsys := fakeKernelTree(t, map[string][]string{
		"a.ko": {"b"},
		"b.ko": {"c"}, // c is built in
	}, "c.ko", "virtio_blk.ko")
	km, err := scanModules(fsys)
	if err != nil {
		t.Fatal(err)
	}
	sel, err := resolveModules(km, []WantedModule{
		{Name: "virtio_blk", Required: true}, // built in: fine
		{Name: "a", Required: true},
		{Name: "opt"},
	})
	if err != nil {
		t.Fatal(err)
	}
	if got := names(sel.order); !slices.Equal(got, []string{"b", "a"}) {
		t.Errorf("order %v", got)
	}
	if !slices.Equal(sel.builtin, []string{"virtio_blk"}) || !slices.Equal(sel.missing, []string{"opt"}) {
		t.Errorf("builtin %v missing %v", sel.builtin, sel.missing)
	}

	_, err = resolveModules(km, []WantedModule{{Name: "gone", Required: true}, {Name: "also_gone", Required: true}})
	if err == nil || !strings.Contains(err.Error(), "lacks module gone") || !strings.Contains(err.Error(), "lacks module also_gone") {
		t.Errorf("error %v, want both missing required modules named", err)
	}
}

func TestResolveErrors(t *testing.T) {
	tests := []struct {
		name    string
		mods    map[string][]string
		want    string
		wantErr string
	}{
		{"cycle", map[string][]string{"a.ko": {"b"}, "b.ko": {"a"}}, "a", "cycle: a -> b -> a"},
		{"missing dependency", map[string][]string{"a.ko": {"nowhere"}}, "a", "nowhere (needed by a)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			km, err := scanModules(fakeKernelTree(t, tt.mods))
			if err != nil {
				t.Fatal(err)
			}
			_, err = resolveModules(km, []WantedModule{{Name: tt.want, Required: true}})
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("error %v, want %q", err, tt.wantErr)
			}
		})
	}
}

func TestCompressedModule(t *testing.T) {
	fsys := fakeKernelTree(t, nil)
	fsys["lib/modules/6.1.0-99-cloud-amd64/kernel/drivers/block/virtio_blk.ko.xz"] = &fstest.MapFile{Data: []byte{0xfd, '7', 'z'}}
	km, err := scanModules(fsys)
	if err != nil {
		t.Fatal(err)
	}
	_, err = resolveModules(km, []WantedModule{{Name: "virtio_blk", Required: true}})
	if err == nil || !strings.Contains(err.Error(), "only available compressed") {
		t.Fatalf("error %v", err)
	}
}

func TestScanModulesErrors(t *testing.T) {
	if _, err := scanModules(fstest.MapFS{"boot/x": {}}); err == nil {
		t.Error("no lib/modules: no error")
	}
	two := fstest.MapFS{"lib/modules/a/x": {}, "lib/modules/b/x": {}}
	if _, err := scanModules(two); err == nil || !strings.Contains(err.Error(), "want one kernel release") {
		t.Errorf("two releases: %v", err)
	}
	bad := fakeKernelTree(t, nil)
	bad["lib/modules/6.1.0-99-cloud-amd64/kernel/bad.ko"] = &fstest.MapFile{Data: []byte("not an ELF")}
	if _, err := scanModules(bad); err == nil || !strings.Contains(err.Error(), "bad.ko") {
		t.Errorf("bad module: %v", err)
	}
}

func TestParseModinfoNoName(t *testing.T) {
	fsys := fakeKernelTree(t, nil)
	fsys["lib/modules/6.1.0-99-cloud-amd64/kernel/old-style.ko"] = &fstest.MapFile{Data: testModule(t, "depends=", "license=GPL")}
	km, err := scanModules(fsys)
	if err != nil {
		t.Fatal(err)
	}
	if m := km.mods["old_style"]; m == nil || len(m.depends) != 0 {
		t.Fatalf("module without name=: %+v", km.mods)
	}
}
