package oci

import (
	"archive/tar"
	"compress/gzip"
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/airlock-dev/airlock/testkit/ocitest"
	"github.com/airlock-dev/airlock/vm"
)

// base and top are two layers: top deletes a file of base with a whiteout,
// hides a directory of base with an opaque marker, hard-links a file of
// base and adds its own.
func base(t *testing.T) []ocitest.Entry {
	return []ocitest.Entry{
		{Name: "etc/", Type: tar.TypeDir},
		{Name: "etc/keep", Body: "kept\n"},
		{Name: "etc/gone", Body: "whited out\n"},
		{Name: "opt/tool/", Type: tar.TypeDir},
		{Name: "opt/tool/old", Body: "hidden by the opaque dir\n"},
		{Name: "lib64/", Type: tar.TypeDir},
		{Name: "lib64/ld-linux-x86-64.so.2", Body: "loader", Mode: 0o755},
		{Name: "bin/", Type: tar.TypeDir},
		{Name: "bin/sh", Body: "#!shell", Mode: 0o755},
	}
}

func top(t *testing.T) []ocitest.Entry {
	return []ocitest.Entry{
		{Name: "etc/.wh.gone"},
		{Name: "opt/tool/", Type: tar.TypeDir},
		{Name: "opt/tool/.wh..wh..opq"},
		{Name: "opt/tool/new", Body: "from the top layer\n"},
		{Name: "bin/sh-again", Type: tar.TypeLink, Linkname: "bin/sh"},
		{Name: "etc/link", Type: tar.TypeSymlink, Linkname: "keep"},
	}
}

func pushTwoLayers(t *testing.T, reg *ocitest.Registry, arch string) string {
	img := ocitest.Image(t, arch, []string{"PATH=/usr/bin:/bin", "LANG=C.UTF-8"},
		ocitest.Layer(t, base(t)...), ocitest.Layer(t, top(t)...))
	return reg.Push(t, "team/app:1", img)
}

func TestPullKeepsLayersOnceAndVerified(t *testing.T) {
	reg := ocitest.NewRegistry(t)
	ref := pushTwoLayers(t, reg, "amd64")
	s := Store{Dir: t.TempDir()}
	var seen []Progress
	im, err := s.Pull(context.Background(), ref, PullOptions{Arch: vm.AMD64, Insecure: true,
		Progress: func(p Progress) { seen = append(seen, p) }})
	if err != nil {
		t.Fatal(err)
	}
	if len(im.Layers) != 2 || im.Platform != "linux/amd64" || !strings.HasPrefix(im.Digest, "sha256:") {
		t.Fatalf("pulled %+v", im)
	}
	if im.Config.Env[1] != "LANG=C.UTF-8" {
		t.Errorf("env %q", im.Config.Env)
	}
	last := seen[len(seen)-1]
	if last.LayersDone != 2 || last.BytesDone != last.Bytes || last.Bytes != im.Size() {
		t.Errorf("last progress %+v, want both layers and %d bytes done", last, im.Size())
	}
	if got := last.String(); !strings.HasPrefix(got, "pulling 2/2 layers, ") {
		t.Errorf("progress reads %q", got)
	}
	for _, l := range im.Layers {
		fi, err := os.Stat(filepath.Join(s.Dir, "blobs", "sha256", strings.TrimPrefix(l.Digest, "sha256:")))
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm() != 0o400 {
			t.Errorf("blob mode %v, want 0400", fi.Mode())
		}
	}
	// A second pull of an image sharing both layers fetches no layer.
	requests := reg.Requests()
	seen = nil
	if _, err := s.Pull(context.Background(), ref, PullOptions{Arch: vm.AMD64, Insecure: true,
		Progress: func(p Progress) { seen = append(seen, p) }}); err != nil {
		t.Fatal(err)
	}
	if seen[0].Bytes != 0 || seen[0].LayersDone != 2 || seen[0].String() != "all 2 layers already here" {
		t.Errorf("second pull: %+v (%q), want nothing to fetch", seen[0], seen[0])
	}
	if n := reg.Requests() - requests; n > 4 {
		t.Errorf("second pull made %d requests, want only the manifest and config", n)
	}
}

func TestPullPicksTheGuestsPlatform(t *testing.T) {
	reg := ocitest.NewRegistry(t)
	amd := ocitest.Image(t, "amd64", nil, ocitest.Layer(t, ocitest.Entry{Name: "arch", Body: "amd64"}))
	arm := ocitest.Image(t, "arm64", nil, ocitest.Layer(t, ocitest.Entry{Name: "arch", Body: "arm64"}))
	ref := reg.PushIndex(t, "multi:latest", amd, arm)
	s := Store{Dir: t.TempDir()}
	for _, arch := range []vm.Arch{vm.ARM64, vm.AMD64} {
		im, err := s.Pull(context.Background(), ref, PullOptions{Arch: arch, Insecure: true})
		if err != nil {
			t.Fatal(err)
		}
		want := "linux/" + string(arch)
		if arch == vm.ARM64 {
			want += "/v8"
		}
		if im.Platform != want {
			t.Errorf("%s: pulled %s", arch, im.Platform)
		}
		dst := filepath.Join(t.TempDir(), "lower.img")
		if _, err := s.WriteRootfs(context.Background(), im, dst); err != nil {
			t.Fatal(err)
		}
		if got := debugfs(t, dst, "cat /arch"); got != string(arch) {
			t.Errorf("%s: the root disk's /arch says %q", arch, got)
		}
	}
	// An image made for amd64 only has no variant for arm64.
	only := reg.Push(t, "amd-only:1", amd)
	_, err := s.Pull(context.Background(), only, PullOptions{Arch: vm.ARM64, Insecure: true})
	if !errors.Is(err, ErrPlatform) || !strings.Contains(err.Error(), "linux/amd64") {
		t.Errorf("amd64-only image pulled for arm64: %v", err)
	}
	idx := reg.PushIndex(t, "amd-index:1", amd)
	_, err = s.Pull(context.Background(), idx, PullOptions{Arch: vm.ARM64, Insecure: true})
	if !errors.Is(err, ErrPlatform) || !strings.Contains(err.Error(), "it has linux/amd64") {
		t.Errorf("index without arm64 pulled for arm64: %v", err)
	}
}

func TestPullErrorsSayWhatToDo(t *testing.T) {
	reg := ocitest.NewRegistry(t)
	ref := pushTwoLayers(t, reg, "amd64")
	s := Store{Dir: t.TempDir()}
	ctx := context.Background()

	_, err := s.Pull(ctx, reg.Host+"/team/nothing:1", PullOptions{Arch: vm.AMD64, Insecure: true})
	if !errors.Is(err, ErrNotFound) || !strings.Contains(err.Error(), "no such image") {
		t.Errorf("unknown image: %v", err)
	}
	_, err = s.Pull(ctx, "Not A Ref!!", PullOptions{Arch: vm.AMD64})
	if err == nil || !strings.Contains(err.Error(), "not an image reference") {
		t.Errorf("bad reference: %v", err)
	}
	// A registry that wants credentials: none, wrong ones, right ones.
	reg.RequireCredentials("me", "secret")
	_, err = s.Pull(ctx, ref, PullOptions{Arch: vm.AMD64, Insecure: true, Keychain: ocitest.Anonymous()})
	if !errors.Is(err, ErrDenied) || !strings.Contains(err.Error(), "docker login "+reg.Host) {
		t.Errorf("refused credentials: %v", err)
	}
	if _, err := s.Pull(ctx, ref, PullOptions{Arch: vm.AMD64, Insecure: true, Keychain: reg.Keychain()}); err != nil {
		t.Errorf("with the right credentials: %v", err)
	}
	// Nothing listens there.
	_, err = s.Pull(ctx, "127.0.0.1:1/x:1", PullOptions{Arch: vm.AMD64, Insecure: true})
	if err == nil || !strings.Contains(err.Error(), "cannot reach the registry") {
		t.Errorf("unreachable registry: %v", err)
	}
}

func TestStoreRefusesWrongContent(t *testing.T) {
	s := Store{Dir: t.TempDir()}
	d := mustHash(t, "sha256:"+strings.Repeat("ab", 32))
	if err := s.Put(d, -1, strings.NewReader("not that")); err == nil || !strings.Contains(err.Error(), "digest") {
		t.Fatalf("kept content under a digest it does not have: %v", err)
	}
	if s.Has(d) {
		t.Fatal("the wrong blob is in the store")
	}
	entries, _ := os.ReadDir(filepath.Join(s.Dir, "blobs", "sha256"))
	if len(entries) != 0 {
		t.Errorf("left %d files behind", len(entries))
	}
	if _, err := s.Open(mustHash(t, "sha256:../../etc/passwd")); err == nil {
		t.Error("opened a path that is not a digest")
	}
}

func TestWriteRootfsAppliesWhiteouts(t *testing.T) {
	reg := ocitest.NewRegistry(t)
	ref := pushTwoLayers(t, reg, "amd64")
	s := Store{Dir: t.TempDir()}
	im, err := s.Pull(context.Background(), ref, PullOptions{Arch: vm.AMD64, Insecure: true})
	if err != nil {
		t.Fatal(err)
	}
	dst := filepath.Join(t.TempDir(), "lower.img")
	res, err := s.WriteRootfs(context.Background(), im, dst)
	if err != nil {
		t.Fatal(err)
	}
	if res.Libc != "glibc" {
		t.Errorf("libc %q, want glibc", res.Libc)
	}
	fsck(t, dst)
	if got := debugfs(t, dst, "cat /etc/keep"); got != "kept\n" {
		t.Errorf("/etc/keep: %q", got)
	}
	if got := debugfs(t, dst, "cat /opt/tool/new"); got != "from the top layer\n" {
		t.Errorf("/opt/tool/new: %q", got)
	}
	ls := debugfs(t, dst, "ls -l /etc") + debugfs(t, dst, "ls -l /opt/tool")
	for _, gone := range []string{"gone", "old", ".wh."} {
		if strings.Contains(ls, gone) {
			t.Errorf("%q survived the whiteouts:\n%s", gone, ls)
		}
	}
	if got := debugfs(t, dst, "stat /bin/sh-again"); !strings.Contains(got, "Links: 2") {
		t.Errorf("the hard link across layers is not a link:\n%s", got)
	}
	// A layer on top from a file (a provisioning layer) goes on last.
	extra := filepath.Join(t.TempDir(), "extra.tar")
	if err := os.WriteFile(extra, ocitest.Tar(t, ocitest.Entry{Name: "etc/.wh.keep"}, ocitest.Entry{Name: "etc/added", Body: "provisioned"}), 0o644); err != nil {
		t.Fatal(err)
	}
	dst2 := filepath.Join(t.TempDir(), "lower2.img")
	if _, err := s.WriteRootfs(context.Background(), im, dst2, extra); err != nil {
		t.Fatal(err)
	}
	if got := debugfs(t, dst2, "ls -l /etc"); strings.Contains(got, " keep") || !strings.Contains(got, "added") {
		t.Errorf("the extra layer did not apply:\n%s", got)
	}
}

func TestWriteRootfsHostileLayers(t *testing.T) {
	reg := ocitest.NewRegistry(t)
	s := Store{Dir: t.TempDir()}
	// Paths out of the root are refused; links out of it are dropped.
	for name, entries := range map[string][]ocitest.Entry{
		"dotdot": {{Name: "../../escape", Body: "x"}},
		"link":   {{Name: "ok", Body: "x"}, {Name: "up", Type: tar.TypeSymlink, Linkname: "../../../../etc/passwd"}},
	} {
		t.Run(name, func(t *testing.T) {
			img := ocitest.Image(t, "amd64", nil, ocitest.Layer(t, entries...))
			im, err := s.Pull(context.Background(), reg.Push(t, "hostile/"+name+":1", img), PullOptions{Arch: vm.AMD64, Insecure: true})
			if err != nil {
				t.Fatal(err)
			}
			dst := filepath.Join(t.TempDir(), "lower.img")
			_, err = s.WriteRootfs(context.Background(), im, dst)
			switch name {
			case "dotdot":
				if err == nil || !strings.Contains(err.Error(), "unsafe") {
					t.Errorf("a ../ path converted: %v", err)
				}
				if _, serr := os.Stat(dst); serr == nil {
					t.Error("a disk was left behind")
				}
			case "link":
				if err != nil {
					t.Fatal(err)
				}
				if got := debugfs(t, dst, "ls -l /"); strings.Contains(got, " up") {
					t.Errorf("a link out of the root was kept:\n%s", got)
				}
			}
		})
	}
	// A musl image is told apart.
	img := ocitest.Image(t, "amd64", nil, ocitest.Layer(t, ocitest.Entry{Name: "lib/ld-musl-x86_64.so.1", Body: "musl"}))
	im, err := s.Pull(context.Background(), reg.Push(t, "alpine:1", img), PullOptions{Arch: vm.AMD64, Insecure: true})
	if err != nil {
		t.Fatal(err)
	}
	res, err := s.WriteRootfs(context.Background(), im, filepath.Join(t.TempDir(), "l.img"))
	if err != nil || res.Libc != "musl" {
		t.Errorf("musl image: %+v %v", res, err)
	}
}

// debugfs runs one debugfs request on the image (the host's e2fsprogs,
// for tests only) and returns what it printed.
func debugfs(t *testing.T, img, req string) string {
	t.Helper()
	out, err := exec.Command(sbin(t, "debugfs"), "-R", req, img).Output()
	if err != nil {
		t.Fatalf("debugfs %q: %v", req, err)
	}
	return string(out)
}

func fsck(t *testing.T, img string) {
	t.Helper()
	out, err := exec.Command(sbin(t, "e2fsck"), "-fn", img).CombinedOutput()
	if err == nil {
		return
	}
	// tar2ext4 leaves the padding bits of a partly used last inode bitmap
	// unset; the kernel reads only the bits of inodes that exist.
	var other []string
	for _, l := range strings.Split(string(out), "\n") {
		if strings.Contains(l, "Fix? no") && !strings.Contains(l, "Padding at end of inode bitmap is not set") {
			other = append(other, l)
		}
	}
	if len(other) > 0 {
		t.Errorf("e2fsck -fn: %v\n%s", err, out)
	}
}

func sbin(t *testing.T, name string) string {
	t.Helper()
	if p, err := exec.LookPath(name); err == nil {
		return p
	}
	for _, d := range []string{"/usr/sbin", "/sbin"} {
		if _, err := os.Stat(filepath.Join(d, name)); err == nil {
			return filepath.Join(d, name)
		}
	}
	t.Fatalf("%s not found: install e2fsprogs (scripts/setup-debian does)", name)
	return ""
}

func mustHash(t *testing.T, s string) v1.Hash {
	t.Helper()
	h, err := v1.NewHash(s)
	if err != nil {
		return v1.Hash{Algorithm: "sha256", Hex: strings.TrimPrefix(s, "sha256:")}
	}
	return h
}

func TestPushAProvisionedImageAndPullItBack(t *testing.T) {
	reg := ocitest.NewRegistry(t)
	ref := pushTwoLayers(t, reg, "amd64")
	s := Store{Dir: t.TempDir()}
	ctx := context.Background()
	im, err := s.Pull(ctx, ref, PullOptions{Arch: vm.AMD64})
	if err != nil {
		t.Fatal(err)
	}
	bw, err := s.NewBlob()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := bw.Write(ocitest.Tar(t, ocitest.Entry{Name: "etc/provisioned", Body: "yes\n"}, ocitest.Entry{Name: "etc/.wh.keep"})); err != nil {
		t.Fatal(err)
	}
	d, _, err := bw.Commit()
	if err != nil {
		t.Fatal(err)
	}
	out := reg.Host + "/airlock/agents:test"
	digest, err := s.Push(ctx, im, []string{d.String()}, out, PushOptions{Arch: vm.AMD64, User: "agent"})
	if err != nil {
		t.Fatal(err)
	}
	other := Store{Dir: t.TempDir()}
	back, err := other.Pull(ctx, out, PullOptions{Arch: vm.AMD64})
	if err != nil {
		t.Fatal(err)
	}
	if back.Digest != digest || len(back.Layers) != 3 || back.Config.User != "agent" || back.Config.Env[1] != "LANG=C.UTF-8" {
		t.Fatalf("pulled back %+v (pushed %s)", back, digest)
	}
	dst := filepath.Join(t.TempDir(), "lower.img")
	if _, err := other.WriteRootfs(ctx, back, dst); err != nil {
		t.Fatal(err)
	}
	if got := debugfs(t, dst, "cat /etc/provisioned"); got != "yes\n" {
		t.Errorf("the provisioning layer did not travel: %q", got)
	}
	if got := debugfs(t, dst, "ls -l /etc"); strings.Contains(got, " keep") {
		t.Errorf("the provisioning layer's whiteout did not travel:\n%s", got)
	}
}

// TestWriteRootfsInflation: a layer of a few hundred kilobytes of gzip
// holding a large file of zeros (a decompression bomb) stops the disk's
// writing past the inflation limit, with the figures, and leaves no disk;
// a host's disk running low stops it too, saying how much is left.
func TestWriteRootfsInflation(t *testing.T) {
	defer func(floor, free, every int64) { maxInflatedFloor, minFree, freeCheckEvery = floor, free, every }(maxInflatedFloor, minFree, freeCheckEvery)
	maxInflatedFloor = 32 << 20
	bomb := filepath.Join(t.TempDir(), "bomb.tar.gz")
	f, err := os.Create(bomb)
	if err != nil {
		t.Fatal(err)
	}
	gz, _ := gzip.NewWriterLevel(f, gzip.BestSpeed)
	tw := tar.NewWriter(gz)
	const size = 64 << 20
	if err := tw.WriteHeader(&tar.Header{Name: "zeros", Mode: 0o644, Size: size, Typeflag: tar.TypeReg}); err != nil {
		t.Fatal(err)
	}
	if _, err := io.CopyN(tw, zeroReader{}, size); err != nil {
		t.Fatal(err)
	}
	if err := errors.Join(tw.Close(), gz.Close(), f.Close()); err != nil {
		t.Fatal(err)
	}
	reg := ocitest.NewRegistry(t)
	ref := reg.Push(t, "team/bomb:1", ocitest.Image(t, "amd64", nil, ocitest.LayerFromFile(t, bomb)))
	s := Store{Dir: t.TempDir()}
	im, err := s.Pull(context.Background(), ref, PullOptions{Arch: vm.AMD64, Insecure: true})
	if err != nil {
		t.Fatal(err)
	}
	dst := filepath.Join(t.TempDir(), "lower.img")
	_, err = s.WriteRootfs(context.Background(), im, dst)
	if err == nil || !strings.Contains(err.Error(), "inflate to more than 32.0 MiB from") || !strings.Contains(err.Error(), "over 100 to 1") {
		t.Fatalf("a decompression bomb: %v", err)
	}
	if _, serr := os.Stat(dst); !errors.Is(serr, os.ErrNotExist) {
		t.Errorf("a disk was left at %s: %v", dst, serr)
	}
	t.Log(err)

	// Within the limit, on a host whose disk is "full".
	maxInflatedFloor, minFree, freeCheckEvery = 1<<30, 1<<62, 1<<20
	if _, err := s.WriteRootfs(context.Background(), im, dst); err == nil || !strings.Contains(err.Error(), "the host's disk has") || !strings.Contains(err.Error(), "free some space") {
		t.Fatalf("a host's disk running low: %v", err)
	}
}

type zeroReader struct{}

func (zeroReader) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}
