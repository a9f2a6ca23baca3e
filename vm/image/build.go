package image

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"github.com/BurntSushi/toml"

	"github.com/airlock-dev/airlock/internal/atomicfile"
	"github.com/airlock-dev/airlock/vm"
)

// DefaultName is the name of the minimal image.
const DefaultName = "minimal"

// Packages the minimal image is built from.
const busyboxPackage = "busybox-static"

// BuildOptions says what image to build.
type BuildOptions struct {
	// Home is Airlock's home directory; the image goes to
	// Home/images/<Name>/<Arch>/.
	Home string
	// Name is the image name; empty means DefaultName ("minimal").
	Name string
	// Arch is the guest architecture.
	Arch vm.Arch
	// GuestBinary is the path of the static airlock-guest built for Arch
	// (the caller builds it). It becomes the initramfs's /init.
	GuestBinary string
	// CacheDir keeps downloaded .debs; empty means Home/cache/debs.
	CacheDir string
	// Rootfs, if set, gives the image a root disk with this content;
	// nil means FullSpec for the image named FullName, none otherwise.
	Rootfs *RootfsSpec
	// Progress receives typed progress events; nil discards them.
	Progress func(Progress)
	// Logger receives diagnostics; nil discards them.
	Logger *slog.Logger
}

// Step names a phase of a build.
type Step string

const (
	StepCheck     Step = "check"     // checking the host's apt and the inputs
	StepResolve   Step = "resolve"   // asking apt which package versions to use
	StepDownload  Step = "download"  // one package; Done/Total in bytes
	StepExtract   Step = "extract"   // unpacking one package
	StepKernel    Step = "kernel"    // decompressing and checking the kernel
	StepModules   Step = "modules"   // resolving modules; Done/Total modules
	StepInitramfs Step = "initramfs" // writing the initramfs; Done/Total bytes
	StepInstall   Step = "install"   // moving the image into place
	StepDone      Step = "done"
)

// Progress is one build progress event.
type Progress struct {
	Step Step
	// Item is what the step works on (a package, a file), if anything.
	Item string
	// Done and Total measure the step's progress (bytes, modules); Total 0
	// means unknown.
	Done, Total int64
	// Cached is set on a download step served from the cache.
	Cached bool
}

// Build builds the minimal image (a kernel and an initramfs with the
// guest agent, busybox and the kernel modules of MinimalModules) from
// Debian packages fetched with the host's apt. It writes into a temporary
// directory beside the image and moves it into place at the end, so a
// failed or cancelled build leaves any previous image as it was.
func Build(ctx context.Context, opts BuildOptions) (*Image, error) {
	b, err := newBuilder(opts)
	if err != nil {
		return nil, err
	}
	return b.build(ctx)
}

type builder struct {
	opts     BuildOptions
	name     string
	log      *slog.Logger
	progress func(Progress)
	apt      *apt
	wanted   []WantedModule
	docker   []WantedModule // loaded when a Docker Engine starts
	// rootfs is the root disk's content (the full image); nil builds an
	// image that runs from its initramfs.
	rootfs *RootfsSpec
}

func newBuilder(opts BuildOptions) (*builder, error) {
	b := &builder{opts: opts, name: opts.Name, log: opts.Logger, progress: opts.Progress}
	if b.name == "" {
		b.name = DefaultName
	}
	if b.log == nil {
		b.log = slog.New(slog.DiscardHandler)
	}
	if b.progress == nil {
		b.progress = func(Progress) {}
	}
	var errs []error
	if opts.Home == "" {
		errs = append(errs, errors.New("no home directory"))
	}
	if err := validName(b.name); err != nil {
		errs = append(errs, err)
	}
	if err := validArch(opts.Arch); err != nil {
		errs = append(errs, err)
	}
	if opts.GuestBinary == "" {
		errs = append(errs, errors.New("no guest binary: build airlock-guest for the image's arch and pass its path"))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("build image: %w", err)
	}
	cache := opts.CacheDir
	if cache == "" {
		cache = filepath.Join(opts.Home, "cache", "debs")
	}
	b.apt = newApt(cache, b.log)
	b.wanted = MinimalModules(opts.Arch)
	b.docker = DockerModules()
	if opts.Rootfs != nil {
		b.rootfs = opts.Rootfs
	} else if b.name == FullName {
		spec := FullSpec(opts.Arch)
		b.rootfs = &spec
	}
	return b, nil
}

func (b *builder) build(ctx context.Context) (_ *Image, err error) {
	arch := b.opts.Arch
	start := time.Now()
	defer func() {
		if err != nil {
			err = fmt.Errorf("build image %s/%s: %w", b.name, arch, err)
		}
	}()

	b.progress(Progress{Step: StepCheck})
	guest, err := os.ReadFile(b.opts.GuestBinary)
	if err != nil {
		return nil, fmt.Errorf("read guest binary: %w", err)
	}
	if err := checkStaticELF("guest binary "+b.opts.GuestBinary, arch, guest); err != nil {
		return nil, err
	}
	if err := b.apt.check(ctx, arch); err != nil {
		return nil, err
	}
	var host fullHost
	if b.rootfs != nil {
		if host, err = checkFullHost(arch, os.Geteuid(), runtime.GOARCH, binfmtEnabled); err != nil {
			return nil, err
		}
	}

	pk, err := b.fetch(ctx)
	if err != nil {
		return nil, err
	}
	parent := filepath.Join(b.opts.Home, "images", b.name)
	if err := os.MkdirAll(parent, 0o755); err != nil {
		return nil, err
	}
	tmp, err := os.MkdirTemp(parent, "."+string(arch)+".build-")
	if err != nil {
		return nil, err
	}
	defer func() {
		if tmp != "" {
			os.RemoveAll(tmp)
		}
	}()
	if err := os.Chmod(tmp, 0o755); err != nil {
		return nil, err
	}
	scratch := filepath.Join(tmp, ".scratch")
	bf, err := b.writeBoot(ctx, pk, guest, scratch, tmp)
	if err != nil {
		return nil, err
	}
	if err := os.RemoveAll(scratch); err != nil {
		return nil, err
	}
	cmdline := DefaultCmdline
	var rootfs *RootfsMeta
	if b.rootfs != nil {
		rootfs, err = b.buildRootfs(ctx, host, *b.rootfs, scratch, filepath.Join(tmp, RootfsFile))
		if err != nil {
			return nil, err
		}
		if err := os.RemoveAll(scratch); err != nil {
			return nil, err
		}
		cmdline += " " + guestRootArg + "=" + RootDevice
	}
	meta := b.meta(pk, bf, guest, cmdline, rootfs)
	if err := writeMeta(filepath.Join(tmp, MetaFile), meta); err != nil {
		return nil, err
	}

	b.progress(Progress{Step: StepInstall})
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	dst := Dir(b.opts.Home, b.name, arch)
	if err := install(tmp, dst); err != nil {
		return nil, fmt.Errorf("install: %w", err)
	}
	tmp = ""
	im, err := Load(b.opts.Home, b.name, arch)
	if err != nil {
		return nil, err
	}
	b.log.Info("image built", "dir", dst, "kernel", pk.kernel.Name, "modules", len(bf.modules), "initrd_bytes", bf.initrd.Size, "took", time.Since(start).Round(time.Millisecond))
	b.progress(Progress{Step: StepDone, Item: dst})
	return im, nil
}

// debs are the packages an image is built from, downloaded: the kernel
// (and the meta-package that chose it) and busybox, with their files.
type debs struct {
	kmeta, kernel, busybox *debPackage
	files                  map[string]string // package name → .deb
}

// fetch resolves the kernel and busybox packages for the image's arch and
// downloads them (or finds them in the cache).
func (b *builder) fetch(ctx context.Context) (debs, error) {
	arch := b.opts.Arch
	b.progress(Progress{Step: StepResolve, Item: kernelMetaPackage(arch) + ", " + busyboxPackage})
	pkgs, err := b.apt.resolve(ctx, arch, kernelMetaPackage(arch), busyboxPackage)
	if err != nil {
		return debs{}, err
	}
	kmeta, bbpkg := pkgs[kernelMetaPackage(arch)], pkgs[busyboxPackage]
	b.progress(Progress{Step: StepResolve, Item: kmeta.Name + " " + kmeta.Version})
	kpkg, err := b.apt.kernelFor(ctx, arch, kmeta)
	if err != nil {
		return debs{}, err
	}
	b.log.Info("resolved packages", "kernel", kpkg.Name, "kernel_version", kpkg.Version, "busybox", bbpkg.Version)

	files := make(map[string]string)
	for _, p := range []*debPackage{kpkg, bbpkg} {
		b.progress(Progress{Step: StepDownload, Item: p.Name, Total: p.Size})
		file, cached, err := b.apt.download(ctx, p)
		if err != nil {
			return debs{}, err
		}
		b.log.Info("package", "name", p.Name, "version", p.Version, "file", file, "cached", cached)
		b.progress(Progress{Step: StepDownload, Item: p.Name, Done: p.Size, Total: p.Size, Cached: cached})
		files[p.Name] = file
	}
	return debs{kmeta: kmeta, kernel: kpkg, busybox: bbpkg, files: files}, nil
}

// bootFiles is what writeBoot made: the kernel's file and format, its
// modules and the initramfs.
type bootFiles struct {
	kernel  FileMeta
	format  string
	release string
	modules []string // loaded by the initramfs, in order
	docker  []string // loaded when a Docker Engine starts, in order
	sel     *moduleSelection
	initrd  FileMeta
}

// writeBoot extracts the packages under scratch and writes the kernel
// and the initramfs (the guest agent, busybox and the modules wanted)
// into tmp.
func (b *builder) writeBoot(ctx context.Context, pk debs, guest []byte, scratch, tmp string) (bootFiles, error) {
	arch := b.opts.Arch
	kpkg, bbpkg := pk.kernel, pk.busybox
	kdir, bbdir := filepath.Join(scratch, "kernel"), filepath.Join(scratch, "busybox")
	for _, x := range []struct{ pkg, dir string }{{kpkg.Name, kdir}, {bbpkg.Name, bbdir}} {
		b.progress(Progress{Step: StepExtract, Item: x.pkg})
		if err := b.apt.extract(ctx, pk.files[x.pkg], x.dir); err != nil {
			return bootFiles{}, err
		}
	}
	busybox, err := os.ReadFile(filepath.Join(bbdir, "bin", "busybox"))
	if err != nil {
		return bootFiles{}, fmt.Errorf("%s %s has no bin/busybox: %w", bbpkg.Name, bbpkg.Version, err)
	}
	if err := checkStaticELF("busybox from "+bbpkg.Name, arch, busybox); err != nil {
		return bootFiles{}, err
	}

	b.progress(Progress{Step: StepKernel, Item: kpkg.Name})
	kfs := os.DirFS(kdir)
	kernel, format, err := kernelFromPackage(kfs, arch)
	if err != nil {
		return bootFiles{}, fmt.Errorf("kernel from %s %s: %w", kpkg.Name, kpkg.Version, err)
	}
	if err := atomicfile.WriteFile(filepath.Join(tmp, KernelFile), kernel, 0o644); err != nil {
		return bootFiles{}, err
	}
	kernelMeta := hashBytes(kernel)
	kernel = nil // 50 MB or so; not needed any more

	b.progress(Progress{Step: StepModules, Item: kpkg.Name})
	km, err := scanModules(kfs)
	if err != nil {
		return bootFiles{}, fmt.Errorf("modules of %s: %w", kpkg.Name, err)
	}
	sel, files, names, err := pickModules(kfs, km, b.wanted)
	if err != nil {
		return bootFiles{}, fmt.Errorf("modules of %s: %w", kpkg.Name, err)
	}
	dsel, dfiles, dnames, err := pickModules(kfs, km, b.docker)
	if err != nil {
		return bootFiles{}, fmt.Errorf("Docker's modules of %s: %w", kpkg.Name, err)
	}
	sel.missing = append(sel.missing, dsel.missing...)
	b.progress(Progress{Step: StepModules, Item: kpkg.Name, Done: int64(len(files)), Total: int64(len(files))})
	if len(sel.builtin) > 0 || len(sel.missing) > 0 {
		b.log.Info("modules not loaded", "builtin", sel.builtin, "missing", sel.missing)
	}

	b.progress(Progress{Step: StepInitramfs})
	initrd, err := writeInitrdFile(filepath.Join(tmp, InitrdFile), initramfsContents{guest: guest, busybox: busybox, modules: files, docker: dfiles})
	if err != nil {
		return bootFiles{}, err
	}
	b.progress(Progress{Step: StepInitramfs, Done: initrd.Size, Total: initrd.Size})

	return bootFiles{kernel: kernelMeta, format: format, release: km.release, modules: names, docker: dnames, sel: sel, initrd: initrd}, nil
}

// meta is the image's meta.json.
func (b *builder) meta(pk debs, bf bootFiles, guest []byte, cmdline string, rootfs *RootfsMeta) Meta {
	meta := Meta{
		Format:  MetaFormat,
		Name:    b.name,
		Arch:    b.opts.Arch,
		Created: time.Now().UTC().Truncate(time.Second),
		Cmdline: cmdline,
		Kernel: KernelMeta{
			MetaPackage: pk.kmeta.Name + " " + pk.kmeta.Version,
			Package:     pk.kernel.Name,
			Version:     pk.kernel.Version,
			Release:     bf.release,
			Format:      bf.format,
			FileMeta:    bf.kernel,
		},
		Initrd:         bf.initrd,
		Busybox:        PackageMeta{Package: pk.busybox.Name, Version: pk.busybox.Version},
		Guest:          hashBytes(guest),
		Modules:        bf.modules,
		BuiltinModules: bf.sel.builtin,
		MissingModules: bf.sel.missing,
		DockerModules:  bf.docker,
		Rootfs:         rootfs,
	}
	if rootfs != nil && rootfs.User != "" {
		// useradd --user-group (debian.go): the user's own group, with
		// the same number.
		meta.Users = map[string]string{rootfs.User: ownerString(rootfs.UID, rootfs.UID)}
	}
	return meta
}

// kernelFromPackage finds boot/vmlinuz-* in an extracted kernel package and
// turns it into the kernel Airlock boots (see bootKernel).
func kernelFromPackage(fsys fs.FS, arch vm.Arch) ([]byte, string, error) {
	matches, err := fs.Glob(fsys, "boot/vmlinuz-*")
	if err != nil {
		return nil, "", err
	}
	if len(matches) != 1 {
		return nil, "", fmt.Errorf("want one boot/vmlinuz-* in the package, found %d", len(matches))
	}
	vmlinuz, err := fs.ReadFile(fsys, matches[0])
	if err != nil {
		return nil, "", err
	}
	k, format, err := bootKernel(arch, vmlinuz)
	if err != nil {
		return nil, "", fmt.Errorf("%s: %w", path.Base(matches[0]), err)
	}
	return k, format, nil
}

// pickModules resolves wanted over the kernel's modules and reads their
// files: the selection, the files and the modules' names, in load order.
func pickModules(fsys fs.FS, km *kernelModules, wanted []WantedModule) (*moduleSelection, []moduleFile, []string, error) {
	sel, err := resolveModules(km, wanted)
	if err != nil {
		return nil, nil, nil, err
	}
	files, err := readModules(fsys, sel)
	if err != nil {
		return nil, nil, nil, err
	}
	names := make([]string, 0, len(sel.order))
	for _, m := range sel.order {
		names = append(names, m.name)
	}
	return sel, files, names, nil
}

// readModules reads the selected modules' files, in load order.
func readModules(fsys fs.FS, sel *moduleSelection) ([]moduleFile, error) {
	files := make([]moduleFile, 0, len(sel.order))
	for _, m := range sel.order {
		data, err := fs.ReadFile(fsys, m.path)
		if err != nil {
			return nil, fmt.Errorf("read module %s: %w", m.name, err)
		}
		files = append(files, moduleFile{name: m.name, data: data})
	}
	return files, nil
}

// writeInitrdFile writes the initramfs to file and returns its hash and
// size.
func writeInitrdFile(file string, c initramfsContents) (FileMeta, error) {
	f, err := os.Create(file)
	if err != nil {
		return FileMeta{}, err
	}
	h := sha256.New()
	bw := bufio.NewWriterSize(f, 1<<20)
	n, err := writeInitramfs(io.MultiWriter(bw, h), c)
	if err == nil {
		err = bw.Flush()
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return FileMeta{}, fmt.Errorf("write initramfs: %w", err)
	}
	return FileMeta{SHA256: hex.EncodeToString(h.Sum(nil)), Size: n}, nil
}

func writeMeta(file string, m Meta) error {
	var sb strings.Builder
	sb.WriteString("# Written by airlock image build. Rebuild the image rather than editing it.\n")
	if err := toml.NewEncoder(&sb).Encode(m); err != nil {
		return fmt.Errorf("write %s: %w", MetaFile, err)
	}
	return atomicfile.WriteFile(file, []byte(sb.String()), 0o644)
}

// install moves the finished image directory tmp to dst, replacing any
// image there. dst's parent holds tmp, so the move is a rename.
func install(tmp, dst string) error {
	if err := os.Rename(tmp, dst); err == nil {
		return atomicfile.SyncDir(filepath.Dir(dst))
	} else if _, serr := os.Stat(dst); serr != nil {
		return err
	}
	old, err := replaceDir(tmp, dst)
	if err != nil {
		return err
	}
	return os.RemoveAll(old)
}
