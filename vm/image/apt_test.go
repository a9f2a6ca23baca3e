package image

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/airlock-dev/airlock/vm"
)

const showBusybox = `Package: busybox-static
Source: busybox (1:1.35.0-4+deb12u1)
Version: 1:1.35.0-4+deb12u1+b1
Installed-Size: 1939
Maintainer: Debian Install System Team <debian-boot@lists.debian.org>
Architecture: amd64
Replaces: busybox
Provides: busybox
Conflicts: busybox
Description: Standalone rescue shell with tons of builtin utilities
 BusyBox combines tiny versions of many common UNIX utilities into a single
 small executable.
Size: 928188
SHA256: 3D3FDBE91D4660C873E14B092C213FE81C1DA6362DAA236EB25D0171EB108744

Package: busybox-static
Version: 1:1.30.1-6
Architecture: amd64
Size: 1
SHA256: 0000000000000000000000000000000000000000000000000000000000000000
`

func TestParseShow(t *testing.T) {
	pkgs, err := parseShow([]byte(showBusybox))
	if err != nil {
		t.Fatal(err)
	}
	want := []*debPackage{{
		Name: "busybox-static", Version: "1:1.35.0-4+deb12u1+b1", Arch: "amd64",
		SHA256: "3d3fdbe91d4660c873e14b092c213fe81c1da6362daa236eb25d0171eb108744", Size: 928188,
	}, {
		Name: "busybox-static", Version: "1:1.30.1-6", Arch: "amd64", SHA256: strings.Repeat("0", 64), Size: 1,
	}}
	if diff := cmp.Diff(want, pkgs); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	p := pkgs[0]
	if got := p.FileName(); got != "busybox-static_1%3a1.35.0-4+deb12u1+b1_amd64.deb" {
		t.Errorf("FileName %q", got)
	}
	if got := p.Spec(); got != "busybox-static:amd64=1:1.35.0-4+deb12u1+b1" {
		t.Errorf("Spec %q", got)
	}
	if _, err := parseShow([]byte("E: No packages found\n")); err == nil {
		t.Error("no error for empty output")
	}
}

const policyOut = `linux-image-cloud-amd64:
  Installed: (none)
  Candidate: 6.1.192-2
  Version table:
     6.1.192-2 500
        500 http://deb.debian.org/debian-security bookworm-security/main amd64 Packages
     6.1.176-1 500
        500 http://deb.debian.org/debian bookworm/main amd64 Packages
busybox-static:arm64:
  Installed: (none)
  Candidate: 1:1.35.0-4+deb12u1+b1
  Version table:
     1:1.35.0-4+deb12u1+b1 500
        500 http://deb.debian.org/debian bookworm/main arm64 Packages
gone:
  Installed: (none)
  Candidate: (none)
`

func TestPolicyCandidates(t *testing.T) {
	want := map[string]string{"linux-image-cloud-amd64": "6.1.192-2", "busybox-static": "1:1.35.0-4+deb12u1+b1"}
	if diff := cmp.Diff(want, policyCandidates([]byte(policyOut))); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	if got := policyCandidates(nil); len(got) != 0 {
		t.Errorf("empty output: %v", got)
	}
}

func TestParseDepends(t *testing.T) {
	got := parseDepends("linux-image-6.1.0-56-cloud-amd64 (= 6.1.192-2), libc6 (>= 2.34) | libc6-alt, foo:any, bar(=1)")
	want := []dependency{
		{Name: "linux-image-6.1.0-56-cloud-amd64", Version: "6.1.192-2"},
		{Name: "libc6"},
		{Name: "foo"},
		{Name: "bar", Version: "1"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

// fakeApt answers the apt and dpkg commands an image build runs from a
// table of packages, "downloading" and "extracting" them in Go.
type fakeApt struct {
	native, foreign string
	missing         []string // programs not on PATH
	pkgs            map[string]fakePkg
	downloads       []string
	aptCache        int // apt-cache runs
}

type fakePkg struct {
	version, depends string
	deb              []byte            // content of the .deb file
	tree             map[string][]byte // what dpkg-deb -x unpacks
}

func (f *fakeApt) sha(p fakePkg) string { return hashBytes(p.deb).SHA256 }

func (f *fakeApt) install(a *apt) {
	a.lookPath = func(name string) (string, error) {
		for _, m := range f.missing {
			if m == name {
				return "", fmt.Errorf("exec: %q: executable file not found in $PATH", name)
			}
		}
		return "/usr/bin/" + name, nil
	}
	a.run = f.run
}

func (f *fakeApt) lookup(spec string) (string, string, fakePkg, bool) {
	name, version, _ := strings.Cut(spec, "=")
	name, arch, _ := strings.Cut(name, ":")
	if arch != f.native && !strings.Contains(f.foreign, arch) {
		return "", "", fakePkg{}, false
	}
	p, ok := f.pkgs[name]
	if !ok || version != "" && version != p.version {
		return "", "", fakePkg{}, false
	}
	return name, arch, p, true
}

func (f *fakeApt) run(ctx context.Context, dir, name string, args ...string) ([]byte, error) {
	cmd := name + " " + strings.Join(args, " ")
	switch {
	case cmd == "dpkg --print-architecture":
		return []byte(f.native + "\n"), nil
	case cmd == "dpkg --print-foreign-architectures":
		return []byte(f.foreign), nil
	case name == "apt-cache" && args[0] == "policy":
		var out strings.Builder
		for _, spec := range args[1:] {
			if n, _, p, ok := f.lookup(spec); ok {
				fmt.Fprintf(&out, "%s:\n  Installed: (none)\n  Candidate: %s\n", n, p.version)
			}
		}
		f.aptCache++
		return []byte(out.String()), nil
	case name == "apt-cache" && args[0] == "show":
		var out strings.Builder
		for _, spec := range args[1:] {
			if n, arch, p, ok := f.lookup(spec); ok {
				fmt.Fprintf(&out, "Package: %s\nVersion: %s\nArchitecture: %s\nDepends: %s\nSize: %d\nSHA256: %s\n\n",
					n, p.version, arch, p.depends, len(p.deb), f.sha(p))
			}
		}
		f.aptCache++
		if out.Len() == 0 {
			return []byte("E: No packages found\n"), nil
		}
		return []byte(out.String()), nil
	case name == "apt-get" && args[0] == "download":
		n, arch, p, ok := f.lookup(args[1])
		if !ok {
			return []byte("E: Unable to locate package " + args[1]), fmt.Errorf("apt-get download: exit status 100")
		}
		f.downloads = append(f.downloads, n)
		dp := &debPackage{Name: n, Version: p.version, Arch: arch}
		return nil, os.WriteFile(filepath.Join(dir, dp.FileName()), p.deb, 0o644)
	case name == "dpkg-deb" && args[0] == "-x":
		deb, dst := args[1], args[2]
		for _, p := range f.pkgs {
			if hashFile2(deb) != f.sha(p) {
				continue
			}
			for path, data := range p.tree {
				full := filepath.Join(dst, filepath.FromSlash(path))
				if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
					return nil, err
				}
				if err := os.WriteFile(full, data, 0o644); err != nil {
					return nil, err
				}
			}
			return nil, nil
		}
		return nil, errors.New("dpkg-deb: not a known package")
	}
	return nil, fmt.Errorf("fake apt: unexpected command %q", cmd)
}

func hashFile2(path string) string {
	fm, err := hashFile(path)
	if err != nil {
		return ""
	}
	return fm.SHA256
}

func TestAptCheck(t *testing.T) {
	tests := []struct {
		name    string
		f       fakeApt
		arch    vm.Arch
		wantErr string
	}{
		{"native", fakeApt{native: "amd64"}, vm.AMD64, ""},
		{"foreign enabled", fakeApt{native: "amd64", foreign: "arm64\n"}, vm.ARM64, ""},
		{"foreign not enabled", fakeApt{native: "amd64"}, vm.ARM64,
			"enable them with: sudo dpkg --add-architecture arm64 && sudo apt-get update"},
		{"no apt", fakeApt{native: "amd64", missing: []string{"apt-get", "apt-cache", "dpkg-deb"}}, vm.AMD64,
			"this host lacks apt-get, apt-cache, dpkg-deb"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := newApt(t.TempDir(), nil)
			tt.f.install(a)
			err := a.check(context.Background(), tt.arch)
			if tt.wantErr == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("error %v, want %q", err, tt.wantErr)
			}
		})
	}
}

func TestResolveKernelAndDownload(t *testing.T) {
	f := &fakeApt{native: "amd64", pkgs: map[string]fakePkg{
		"linux-image-cloud-amd64":          {version: "6.1.192-2", depends: "linux-image-6.1.0-56-cloud-amd64 (= 6.1.192-2)", deb: []byte("meta")},
		"linux-image-6.1.0-56-cloud-amd64": {version: "6.1.192-2", deb: []byte("kernel deb")},
	}}
	cache := t.TempDir()
	a := newApt(cache, nil)
	f.install(a)
	ctx := context.Background()
	pkgs, err := a.resolve(ctx, vm.AMD64, "linux-image-cloud-amd64")
	if err != nil {
		t.Fatal(err)
	}
	meta := pkgs["linux-image-cloud-amd64"]
	k, err := a.kernelFor(ctx, vm.AMD64, meta)
	if err != nil {
		t.Fatal(err)
	}
	if meta.Name != "linux-image-cloud-amd64" || k.Name != "linux-image-6.1.0-56-cloud-amd64" || k.Version != "6.1.192-2" {
		t.Fatalf("resolved %+v -> %+v", meta, k)
	}
	if f.aptCache != 3 {
		t.Errorf("apt-cache ran %d times, want 3", f.aptCache)
	}
	file, cached, err := a.download(ctx, k)
	if err != nil || cached {
		t.Fatalf("first download: cached=%v, %v", cached, err)
	}
	if b, _ := os.ReadFile(file); string(b) != "kernel deb" {
		t.Fatalf("downloaded %q", b)
	}
	if _, cached, err = a.download(ctx, k); err != nil || !cached {
		t.Fatalf("second download: cached=%v, %v", cached, err)
	}
	// A damaged cached file is fetched again.
	os.WriteFile(file, []byte("damaged"), 0o644)
	if _, cached, err = a.download(ctx, k); err != nil || cached {
		t.Fatalf("download over a damaged copy: cached=%v, %v", cached, err)
	}
	if len(f.downloads) != 2 {
		t.Errorf("apt-get download ran %d times, want 2", len(f.downloads))
	}

	// apt serving a file whose checksum differs from its index is an
	// error, and leaves nothing in the cache.
	k.SHA256 = strings.Repeat("0", 64)
	os.Remove(file)
	if _, _, err := a.download(ctx, k); err == nil || !strings.Contains(err.Error(), "apt's index says") {
		t.Fatalf("bad checksum: %v", err)
	}
	if left, _ := os.ReadDir(filepath.Dir(file)); len(left) != 0 {
		t.Errorf("a refused download left %v in the cache", left)
	}
}

// TestDownloadConcurrent: builds fetching the same package at once (the
// minimal and full images' kernel) each get the whole, checked file,
// though apt-get writes its download in place, a part at a time.
func TestDownloadConcurrent(t *testing.T) {
	f := &fakeApt{native: "amd64", pkgs: map[string]fakePkg{
		"linux-image-cloud-amd64":          {version: "6.1.192-2", depends: "linux-image-6.1.0-56-cloud-amd64 (= 6.1.192-2)", deb: []byte("meta")},
		"linux-image-6.1.0-56-cloud-amd64": {version: "6.1.192-2", deb: bytes.Repeat([]byte("kernel deb "), 1000)},
	}}
	a := newApt(t.TempDir(), nil)
	f.install(a)
	ctx := context.Background()
	pkgs, err := a.resolve(ctx, vm.AMD64, "linux-image-cloud-amd64")
	if err != nil {
		t.Fatal(err)
	}
	k, err := a.kernelFor(ctx, vm.AMD64, pkgs["linux-image-cloud-amd64"])
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	run := a.run
	a.run = func(ctx context.Context, dir, name string, args ...string) ([]byte, error) {
		if name != "apt-get" || args[0] != "download" {
			return run(ctx, dir, name, args...)
		}
		// The fake's bookkeeping is not safe for concurrent use: it
		// downloads into a folder of its own, and the file is then
		// written into dir in two halves, as a slow download would.
		scratch := t.TempDir()
		mu.Lock()
		out, err := run(ctx, scratch, name, args...)
		mu.Unlock()
		if err != nil {
			return out, err
		}
		b, err := os.ReadFile(filepath.Join(scratch, k.FileName()))
		if err != nil {
			return nil, err
		}
		w, err := os.Create(filepath.Join(dir, k.FileName()))
		if err != nil {
			return nil, err
		}
		defer w.Close()
		w.Write(b[:len(b)/2])
		time.Sleep(5 * time.Millisecond)
		_, err = w.Write(b[len(b)/2:])
		return out, err
	}
	errs := make(chan error, 8)
	for range 8 {
		go func() {
			file, _, err := a.download(ctx, k)
			if err == nil {
				if b, _ := os.ReadFile(file); !bytes.Equal(b, f.pkgs[k.Name].deb) {
					err = fmt.Errorf("read %d bytes", len(b))
				}
			}
			errs <- err
		}()
	}
	for range 8 {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
}

func TestResolveMissingPackage(t *testing.T) {
	f := &fakeApt{native: "amd64", foreign: "arm64", pkgs: map[string]fakePkg{}}
	a := newApt(t.TempDir(), nil)
	f.install(a)
	_, err := a.resolve(context.Background(), vm.ARM64, "busybox-static")
	if err == nil || !strings.Contains(err.Error(), "run sudo apt-get update") {
		t.Errorf("foreign arch without lists: %v", err)
	}
	f.pkgs["linux-image-cloud-amd64"] = fakePkg{version: "1", depends: "initramfs-tools"}
	_, err = a.resolve(context.Background(), vm.AMD64, "linux-image-cloud-amd64", "busybox-static")
	if err == nil || !strings.Contains(err.Error(), "no package busybox-static") || !strings.Contains(err.Error(), "add a Debian source") {
		t.Errorf("native without the package: %v", err)
	}
	pkgs, err := a.resolve(context.Background(), vm.AMD64, "linux-image-cloud-amd64")
	if err != nil {
		t.Fatal(err)
	}
	_, err = a.kernelFor(context.Background(), vm.AMD64, pkgs["linux-image-cloud-amd64"])
	if err == nil || !strings.Contains(err.Error(), "depends on no linux-image package") {
		t.Errorf("meta package without a kernel: %v", err)
	}
}
