package image

import (
	"bufio"
	"bytes"
	"debug/elf"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"
	"sort"
	"strings"

	"github.com/airlock-dev/airlock/vm"
)

// WantedModule is a kernel module an image asks for. The builder adds the
// modules it depends on.
type WantedModule struct {
	Name string
	// Required makes the build fail when the kernel has the module neither
	// as a .ko nor built in; an optional one is recorded in
	// Meta.MissingModules instead.
	Required bool
}

// MinimalModules are the modules of the minimal image for arch: the virtio
// transports and devices the VM backends attach (console, disk, vsock, rng,
// network, virtio-fs and 9p shares), ext4 for the workspace disk (built
// into Debian's kernels, a module elsewhere), overlay for the root of an
// image made from an OCI image, and the input devices that
// carry the power button.
func MinimalModules(arch vm.Arch) []WantedModule {
	w := []WantedModule{
		{Name: "virtio_pci", Required: true},
		{Name: "virtio_console", Required: true},
		{Name: "virtio_blk", Required: true},
		{Name: "ext4", Required: true},    // the workspace disk
		{Name: "overlay", Required: true}, // the root of an image made from an OCI image
		{Name: "virtio_net"},              // open-network mode only
		{Name: "vmw_vsock_virtio_transport", Required: true},
		{Name: "virtio_rng"},
		{Name: "virtiofs"},
		{Name: "9pnet_virtio"},
		{Name: "9p"},
		{Name: "evdev"},
	}
	switch arch {
	case vm.AMD64:
		w = append(w, WantedModule{Name: "button"}) // ACPI power button
	case vm.ARM64:
		w = append(w, WantedModule{Name: "virtio_mmio"})
	}
	return w
}

// DockerModules are the modules a Docker Engine in the guest needs
// beyond the minimal image's (overlay is one of those): its bridge
// network (bridge, veth, br_netfilter), the iptables rules it writes
// (x_tables with the nat, filter and raw tables and the matches it uses,
// through nf_tables' compatibility layer too), and connection tracking.
// They are in the initramfs but loaded only when a Docker Engine is
// started (guest.DockerModulesOrder), so a boot without one pays nothing
// for them. All are optional: an image whose kernel lacks one is built,
// records it as missing, and the guest's check names it.
func DockerModules() []WantedModule {
	var w []WantedModule
	for _, name := range []string{
		"bridge", "veth", "br_netfilter",
		"nf_conntrack", "nf_nat", "nf_tables", "nft_compat", "nft_chain_nat", "nft_masq",
		"ip_tables", "iptable_filter", "iptable_nat", "iptable_raw", "iptable_mangle",
		"ip6_tables", "ip6table_filter", "ip6table_nat",
		"xt_MASQUERADE", "xt_conntrack", "xt_addrtype", "xt_nat", "xt_tcpudp", "xt_mark", "xt_comment",
	} {
		w = append(w, WantedModule{Name: name})
	}
	return w
}

// kmod is one loadable module of a kernel package.
type kmod struct {
	name    string
	path    string // in the package tree
	depends []string
}

// kernelModules is what a kernel package offers: its loadable modules by
// name and the names of the modules it has built in.
type kernelModules struct {
	release    string
	mods       map[string]*kmod
	compressed map[string]string // name -> path of a .ko.xz/.ko.zst/.ko.gz
	builtin    map[string]bool
	hasBuiltin bool // modules.builtin was present
}

// modName normalises a module name as the kernel does ('-' and '_' are
// the same).
func modName(s string) string { return strings.ReplaceAll(s, "-", "_") }

// scanModules indexes lib/modules/<release>/ of an extracted kernel
// package: every .ko's name and dependencies from its .modinfo section (the
// Debian package has no modules.dep), and modules.builtin.
func scanModules(fsys fs.FS) (*kernelModules, error) {
	rels, err := fs.ReadDir(fsys, "lib/modules")
	if err != nil {
		return nil, fmt.Errorf("scan modules: %w", err)
	}
	var dirs []string
	for _, r := range rels {
		if r.IsDir() {
			dirs = append(dirs, r.Name())
		}
	}
	if len(dirs) != 1 {
		return nil, fmt.Errorf("scan modules: want one kernel release under lib/modules, found %d (%s)", len(dirs), strings.Join(dirs, ", "))
	}
	km := &kernelModules{
		release:    dirs[0],
		mods:       make(map[string]*kmod),
		compressed: make(map[string]string),
		builtin:    make(map[string]bool),
	}
	root := path.Join("lib/modules", km.release)
	err = fs.WalkDir(fsys, root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.Type().IsRegular() {
			return nil
		}
		base := path.Base(p)
		switch {
		case strings.HasSuffix(base, ".ko"):
			m, err := readModinfo(fsys, p)
			if err != nil {
				return err
			}
			if _, dup := km.mods[m.name]; !dup { // WalkDir is in lexical order: keep the first
				km.mods[m.name] = m
			}
		case strings.HasSuffix(base, ".ko.xz"), strings.HasSuffix(base, ".ko.zst"), strings.HasSuffix(base, ".ko.gz"):
			km.compressed[modName(base[:strings.Index(base, ".ko.")])] = p
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("scan modules: %w", err)
	}
	b, err := fs.ReadFile(fsys, path.Join(root, "modules.builtin"))
	switch {
	case err == nil:
		km.hasBuiltin = true
		sc := bufio.NewScanner(bytes.NewReader(b))
		for sc.Scan() {
			if l := strings.TrimSpace(sc.Text()); l != "" {
				km.builtin[modName(strings.TrimSuffix(path.Base(l), ".ko"))] = true
			}
		}
	case errors.Is(err, fs.ErrNotExist):
	default:
		return nil, fmt.Errorf("scan modules: %w", err)
	}
	return km, nil
}

// readModinfo reads a module's name and dependencies from its .modinfo
// section: NUL-separated key=value strings.
func readModinfo(fsys fs.FS, p string) (*kmod, error) {
	b, err := fs.ReadFile(fsys, p)
	if err != nil {
		return nil, err
	}
	m, err := parseModinfo(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", p, err)
	}
	m.path = p
	if m.name == "" {
		m.name = modName(strings.TrimSuffix(path.Base(p), ".ko"))
	}
	return m, nil
}

func parseModinfo(ko []byte) (*kmod, error) {
	f, err := elf.NewFile(bytes.NewReader(ko))
	if err != nil {
		return nil, fmt.Errorf("not an ELF module: %w", err)
	}
	defer f.Close()
	s := f.Section(".modinfo")
	if s == nil {
		return nil, errors.New("no .modinfo section")
	}
	d, err := io.ReadAll(io.LimitReader(s.Open(), 1<<20))
	if err != nil {
		return nil, fmt.Errorf(".modinfo: %w", err)
	}
	m := &kmod{}
	for _, kv := range bytes.Split(d, []byte{0}) {
		k, v, ok := strings.Cut(string(kv), "=")
		if !ok {
			continue
		}
		switch k {
		case "name":
			m.name = modName(v)
		case "depends":
			for _, dep := range strings.Split(v, ",") {
				if dep = strings.TrimSpace(dep); dep != "" {
					m.depends = append(m.depends, modName(dep))
				}
			}
		}
	}
	sort.Strings(m.depends)
	return m, nil
}

// moduleSelection is the result of resolving wanted modules.
type moduleSelection struct {
	order   []*kmod  // load order, dependencies first
	builtin []string // wanted but built in
	missing []string // optional, wanted, absent
}

// resolveModules returns the closure of wanted over the dependencies in
// km, in a deterministic load order: a depth-first post-order from the
// wanted modules in the order given, dependencies visited by name.
func resolveModules(km *kernelModules, wanted []WantedModule) (*moduleSelection, error) {
	sel := &moduleSelection{}
	state := make(map[string]int) // 0 new, 1 visiting, 2 done
	var errs []error
	var visit func(name string, chain []string) error
	visit = func(name string, chain []string) error {
		switch state[name] {
		case 1:
			return fmt.Errorf("module dependency cycle: %s", strings.Join(append(chain, name), " -> "))
		case 2:
			return nil
		}
		m := km.mods[name]
		if m == nil {
			if km.builtin[name] {
				return nil // a dependency on a built-in module is satisfied
			}
			return fmt.Errorf("module %s (needed by %s) is not in kernel %s", name, strings.Join(chain, " -> "), km.release)
		}
		state[name] = 1
		for _, d := range m.depends {
			if err := visit(d, append(chain, name)); err != nil {
				return err
			}
		}
		state[name] = 2
		sel.order = append(sel.order, m)
		return nil
	}
	for _, w := range wanted {
		name := modName(w.Name)
		switch {
		case km.mods[name] != nil:
			if err := visit(name, nil); err != nil {
				errs = append(errs, err)
			}
		case km.builtin[name]:
			sel.builtin = append(sel.builtin, name)
		case km.compressed[name] != "":
			errs = append(errs, fmt.Errorf("module %s is only available compressed (%s); Airlock's image builder reads uncompressed .ko modules only", name, km.compressed[name]))
		case w.Required:
			how := "neither a module nor built in"
			if !km.hasBuiltin {
				how = "not a module, and the package has no modules.builtin to say whether it is built in"
			}
			errs = append(errs, fmt.Errorf("kernel %s lacks module %s (%s); the image needs it: use a kernel with it", km.release, name, how))
		default:
			sel.missing = append(sel.missing, name)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return sel, nil
}
