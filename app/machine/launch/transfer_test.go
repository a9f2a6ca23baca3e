package launch_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/airlock-dev/airlock/guest/client"
	"github.com/airlock-dev/airlock/sync/manifest"
	"github.com/airlock-dev/airlock/sync/objects"
	"github.com/airlock-dev/airlock/sync/transfer"
	"github.com/airlock-dev/airlock/testkit/testenv"
	"github.com/airlock-dev/airlock/vm"
)

// remote adapts a guest client to transfer.Remote (SFTP comes with
// *client.Client).
type remote struct{ *client.Client }

func (r remote) Exec(ctx context.Context, script string, stdin io.Reader, stdout, stderr io.Writer) error {
	return r.Run(ctx, client.Command{Script: script, Stdin: stdin, Stdout: stdout, Stderr: stderr})
}

func snapshot(t testing.TB, proj string) (*manifest.Manifest, *objects.Store) {
	t.Helper()
	m, _, err := manifest.Walk(context.Background(), proj, manifest.WalkOptions{})
	if err != nil {
		t.Fatal(err)
	}
	store, err := objects.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if err := objects.SnapshotTree(context.Background(), proj, m, store); err != nil {
		t.Fatal(err)
	}
	return m, store
}

// TestTransferRoundTrip pushes a small project into a real guest's
// /workspace, lets a script edit it there, and collects the changes.
func TestTransferRoundTrip(t *testing.T) {
	g := boot(t, vm.Arch(runtime.GOARCH))
	proj := t.TempDir()
	for p, c := range map[string]string{
		"README.md":   "# demo\n",
		"main.go":     "package main\n",
		"run.sh":      "#!/bin/sh\necho hi\n",
		"src/a.txt":   "a\n",
		"src/b.txt":   "b\n",
		"src/gone.go": "package gone\n",
	} {
		os.MkdirAll(filepath.Join(proj, filepath.Dir(p)), 0o755)
		if err := os.WriteFile(filepath.Join(proj, p), []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	os.Chmod(filepath.Join(proj, "run.sh"), 0o755)
	os.Mkdir(filepath.Join(proj, "empty"), 0o700)
	os.Symlink("src/a.txt", filepath.Join(proj, "link"))
	base, store := snapshot(t, proj)

	r := remote{g.Client}
	opts := transfer.Options{AgentPath: g.Client.Welcome().Agent}
	if opts.AgentPath != "/init" {
		t.Errorf("welcome says the agent is %q, want /init", opts.AgentPath)
	}
	ctx := t.Context()
	st, err := transfer.Push(ctx, r, "/workspace", base, store, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("pushed %+v", st)
	same, err := remoteManifest(ctx, r, "/workspace", opts)
	if err != nil {
		t.Fatal(err)
	}
	if changes := manifest.Diff(base, same); len(changes) != 0 {
		t.Fatalf("the pushed tree differs from the baseline: %+v", changes)
	}

	edit := `set -e; cd /workspace
printf 'package main\n\nfunc main() {}\n' > main.go
printf 'brand new\n' > src/new.txt
mv src/b.txt src/b-renamed.txt
rm src/gone.go
chmod 644 run.sh
ln -s ../main.go src/main-link
mkfifo src/fifo
`
	if _, stderr, err := run(t, g, client.Command{Script: edit}); err != nil {
		t.Fatalf("edit: %v\n%s", err, stderr)
	}
	after, err := remoteManifest(ctx, r, "/workspace", opts)
	if err != nil {
		t.Fatal(err)
	}
	changes := manifest.Diff(base, after)
	got := map[string]manifest.ChangeKind{}
	for _, c := range changes {
		got[c.Path] = c.Kind
	}
	want := map[string]manifest.ChangeKind{
		"main.go": manifest.Modified, "src/new.txt": manifest.Added, "src/b-renamed.txt": manifest.Renamed,
		"src/gone.go": manifest.Deleted, "run.sh": manifest.ModeChanged, "src/main-link": manifest.Added,
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("changes %v, want %v", got, want)
	}
	before := storeObjects(t, store)
	for _, mode := range []transfer.Mode{transfer.ModeSFTP, transfer.ModeTar} {
		// A fresh store per mode: both must bring exactly the new bytes.
		s2, err := objects.Open(t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		opts.Mode = mode
		pst, err := transfer.Pull(ctx, r, "/workspace", changes, s2, opts)
		if err != nil {
			t.Fatalf("pull (%s): %v", mode, err)
		}
		t.Logf("pulled %+v", pst)
		// A fresh store lacks the renamed and mode-changed files' content
		// too.
		wantSums := []string{sha("package main\n\nfunc main() {}\n"), sha("brand new\n"), sha("b\n"), sha("#!/bin/sh\necho hi\n")}
		if n := storeObjects(t, s2); n != len(wantSums) {
			t.Errorf("%s: store has %d objects, want %d", mode, n, len(wantSums))
		}
		for _, s := range wantSums {
			if err := s2.Verify(s); err != nil {
				t.Errorf("%s: %v", mode, err)
			}
		}
	}
	opts.Mode = transfer.ModeAuto
	if _, err := transfer.Pull(ctx, r, "/workspace", changes, store, opts); err != nil {
		t.Fatal(err)
	}
	if n := storeObjects(t, store); n != before+2 {
		t.Errorf("baseline store grew by %d objects, want 2 (main.go, new.txt)", n-before)
	}
}

func sha(s string) string {
	h := sha256.Sum256([]byte(s))
	return hex.EncodeToString(h[:])
}

func storeObjects(t testing.TB, s *objects.Store) int {
	t.Helper()
	n := 0
	filepath.WalkDir(s.Dir(), func(p string, d fs.DirEntry, err error) error {
		if d != nil && d.IsDir() && d.Name() == "tmp" {
			return filepath.SkipDir
		}
		if err == nil && d.Type().IsRegular() {
			n++
		}
		return nil
	})
	return n
}

// genProject writes files files of about total bytes in all, 100 per
// directory, with incompressible content.
func genProject(t testing.TB, dir string, files int, total int64) {
	t.Helper()
	rng := rand.New(rand.NewPCG(1, 2))
	avg := total / int64(files)
	buf := make([]byte, 2*avg)
	for i := range files {
		d := filepath.Join(dir, fmt.Sprintf("pkg%03d", i/100))
		if i%100 == 0 {
			os.MkdirAll(d, 0o755)
		}
		n := avg/2 + rng.Int64N(avg+1) // avg on average
		for j := range buf[:n] {
			buf[j] = byte(rng.Uint32())
		}
		if err := os.WriteFile(filepath.Join(d, fmt.Sprintf("f%05d.dat", i)), buf[:n], 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// BenchmarkPush pushes a 10,000-file, 100 MB project into a real guest's
// /workspace with each transfer mode, and measures raw tar streams over
// the same link in the same run: host `tar -c` piped into busybox `tar -x`
// in the guest (what a push must beat), and into `cat >/dev/null` (the
// link alone). Run with
//
//	go test -run '^$' -bench Push -benchtime 1x ./app/launch
//
// It prints MB/s for each and the ratio of each mode to raw tar -x.
func BenchmarkPush(b *testing.B) {
	testenv.SkipIfShort(b)
	g := bootWith(b, vm.Arch(runtime.GOARCH), 1536)
	ctx := context.Background()
	proj := b.TempDir()
	genProject(b, proj, 10_000, 100<<20)
	base, store := snapshot(b, proj)
	var size int64
	for _, e := range base.Entries {
		size += e.Size
	}
	r := remote{g.Client}
	opts := transfer.Options{AgentPath: g.Client.Welcome().Agent}
	clean := func(b *testing.B) {
		b.StopTimer()
		if err := r.Exec(ctx, "rm -rf /workspace /tmp/raw; mkdir -p /tmp/raw", nil, nil, nil); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
	rates := map[string]float64{}
	measure := func(name string, f func(b *testing.B)) {
		b.Run(name, func(b *testing.B) {
			b.SetBytes(size)
			var d time.Duration
			for b.Loop() {
				clean(b)
				start := time.Now()
				f(b)
				d += time.Since(start)
			}
			rates[name] = float64(size) * float64(b.N) / d.Seconds() / 1e6
		})
	}
	rawTar := func(guestCmd string) func(b *testing.B) {
		return func(b *testing.B) {
			tarCmd := exec.CommandContext(ctx, "tar", "-c", "-C", proj, ".")
			out, err := tarCmd.StdoutPipe()
			if err != nil {
				b.Fatal(err)
			}
			if err := tarCmd.Start(); err != nil {
				b.Fatal(err)
			}
			var stderr bytes.Buffer
			if err := r.Exec(ctx, guestCmd, out, nil, &stderr); err != nil {
				b.Fatalf("%s: %v\n%s", guestCmd, err, stderr.String())
			}
			if err := tarCmd.Wait(); err != nil {
				b.Fatal(err)
			}
		}
	}
	measure("raw-tar-x", rawTar("tar -x -C /tmp/raw"))
	measure("raw-cat", rawTar("cat >/dev/null"))
	for _, mode := range []transfer.Mode{transfer.ModeTar, transfer.ModeSFTP} {
		measure(string(mode), func(b *testing.B) {
			o := opts
			o.Mode = mode
			if _, err := transfer.Push(ctx, r, "/workspace", base, store, o); err != nil {
				b.Fatal(err)
			}
		})
	}
	if raw := rates["raw-tar-x"]; raw > 0 {
		for _, name := range []string{"raw-tar-x", "raw-cat", "tar", "sftp"} {
			fmt.Printf("push %-9s %7.2f MB/s  %.2fx raw tar -x\n", name, rates[name], rates[name]/raw)
		}
	}
}

// BenchmarkPull pulls 1,000 changed files of 10 KB from a real guest with
// each mode. Run with go test -run '^$' -bench Pull -benchtime 1x ./app/launch
func BenchmarkPull(b *testing.B) {
	testenv.SkipIfShort(b)
	g := bootWith(b, vm.Arch(runtime.GOARCH), 1024)
	ctx := context.Background()
	proj := b.TempDir()
	genProject(b, proj, 1000, 10<<20)
	base, store := snapshot(b, proj)
	r := remote{g.Client}
	opts := transfer.Options{AgentPath: g.Client.Welcome().Agent}
	if _, err := transfer.Push(ctx, r, "/workspace", base, store, opts); err != nil {
		b.Fatal(err)
	}
	if err := r.Exec(ctx, `for f in /workspace/*/*.dat; do echo x >> "$f"; done`, nil, nil, nil); err != nil {
		b.Fatal(err)
	}
	after, err := remoteManifest(ctx, r, "/workspace", opts)
	if err != nil {
		b.Fatal(err)
	}
	changes := manifest.Diff(base, after)
	for _, mode := range []transfer.Mode{transfer.ModeTar, transfer.ModeSFTP} {
		b.Run(string(mode), func(b *testing.B) {
			o := opts
			o.Mode = mode
			for b.Loop() {
				b.StopTimer()
				s, err := objects.Open(b.TempDir())
				if err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
				st, err := transfer.Pull(ctx, r, "/workspace", changes, s, o)
				if err != nil {
					b.Fatal(err)
				}
				b.SetBytes(st.Bytes)
			}
		})
	}
}

// remoteManifest asks for the whole manifest of dir, as a host that knows
// nothing of it does.
func remoteManifest(ctx context.Context, r transfer.Remote, dir string, opts transfer.Options) (*manifest.Manifest, error) {
	k, err := transfer.RemoteManifest(ctx, r, dir, transfer.Known{}, opts)
	return k.Manifest, err
}
