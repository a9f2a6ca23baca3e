package transfer_test

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/airlock-dev/airlock/testkit/testenv"

	"github.com/airlock-dev/airlock/sync/manifest"
	"github.com/airlock-dev/airlock/sync/objects"
	"github.com/airlock-dev/airlock/sync/transfer"
)

// lyingGuest answers every Exec with out on stdout.
func lyingGuest(t *testing.T, out string) *localRemote {
	return &localRemote{t: t, exec: func(ctx context.Context, _ string, _ io.Reader, stdout, _ io.Writer) error {
		_, err := io.WriteString(stdout, out)
		return err
	}}
}

func entries(lines ...string) string {
	return `{"entries":[` + strings.Join(lines, ",") + "]}"
}

const (
	sumA = `"sha256":"87428fc522803d31065e7bce3cf03fe475096631e5e07bbd7a0fde60c4cf25c7"` // "a\n"
	dirE = `{"path":"d","type":"dir","mode":493}`
)

func TestHostileManifest(t *testing.T) {
	for _, tc := range []struct {
		name   string
		out    string
		limits manifest.Limits
		want   error
	}{
		{"dot-dot", entries(`{"path":"../etc/passwd","type":"file","mode":420,"size":2,` + sumA + `}`), manifest.Limits{}, manifest.ErrInvalid},
		{"absolute", entries(`{"path":"/etc/passwd","type":"file","mode":420,"size":2,` + sumA + `}`), manifest.Limits{}, manifest.ErrInvalid},
		{"nul", entries(`{"path":"a\u0000b","type":"file","mode":420,"size":2,` + sumA + `}`), manifest.Limits{}, manifest.ErrInvalid},
		{"under-symlink-to-etc", entries(`{"path":"etc","type":"symlink","mode":511,"target":"/etc"}`, `{"path":"etc/passwd","type":"file","mode":420,"size":2,`+sumA+`}`), manifest.Limits{}, manifest.ErrInvalid},
		{"git-dir", entries(`{"path":".git","type":"dir","mode":493}`, `{"path":".git/config","type":"file","mode":420,"size":2,`+sumA+`}`), manifest.Limits{}, manifest.ErrInvalid},
		{"no-parent", entries(`{"path":"d/x","type":"file","mode":420,"size":2,` + sumA + `}`), manifest.Limits{}, manifest.ErrInvalid},
		{"unsorted", entries(dirE, `{"path":"c","type":"dir","mode":493}`), manifest.Limits{}, manifest.ErrInvalid},
		{"fifo-type", entries(`{"path":"p","type":"fifo","mode":420}`), manifest.Limits{}, manifest.ErrInvalid},
		{"giant-declared-size", entries(`{"path":"sparse","type":"file","mode":420,"size":5000000000,` + sumA + `}`), manifest.Limits{}, manifest.ErrTooLarge},
		{"total-bytes", entries(`{"path":"x","type":"file","mode":420,"size":900000000,`+sumA+`}`, `{"path":"y","type":"file","mode":420,"size":900000000,`+sumA+`}`), manifest.Limits{MaxTotalBytes: 1 << 30}, manifest.ErrTooLarge},
		{"trailing-data", entries() + `{"entries":[]}`, manifest.Limits{}, manifest.ErrInvalid},
		{"unknown-field", `{"entries":[],"run":"rm -rf /"}`, manifest.Limits{}, nil},
		{"oversized-encoding", entries(`{"path":"` + strings.Repeat("x", 200) + `","type":"dir","mode":493}`), manifest.Limits{MaxManifestBytes: 100}, manifest.ErrTooLarge},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := remoteManifest(t.Context(), lyingGuest(t, tc.out), "/workspace", transfer.Options{Limits: tc.limits})
			if err == nil {
				t.Fatal("hostile manifest accepted")
			}
			if tc.want != nil && !errors.Is(err, tc.want) {
				t.Fatalf("got %v, want %v", err, tc.want)
			}
			t.Log(err)
		})
	}
}

// A lying guest lists a file over the per-file cap (under the total):
// the host leaves it out and names it itself, as an honest guest's walk
// would, and the rest stays. The next delta resolves against what the
// guest holds, the left-out file with it.
func TestHostileManifestOverFileCap(t *testing.T) {
	const id = "0123456789abcdef0123456789abcdef"
	out := `{"id":"` + id + `","entries":[{"path":"big","type":"file","mode":420,"size":2000000000,` + sumA + `},{"path":"x","type":"file","mode":420,"size":2,` + sumA + `}]}`
	k, err := transfer.RemoteManifest(t.Context(), lyingGuest(t, out), "/workspace", transfer.Known{}, transfer.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if len(k.Manifest.Entries) != 1 || k.Manifest.Entries[0].Path != "x" {
		t.Errorf("manifest %+v, want x only", k.Manifest.Entries)
	}
	want := []manifest.Exclusion{{Path: "big", Reason: manifest.ReasonTooLarge, Rule: "2000000000 bytes, over the 1073741824-byte cap", Size: 2000000000}}
	if diff := cmp.Diff(want, k.Skipped); diff != "" {
		t.Errorf("skipped (-want +got):\n%s", diff)
	}
	next := `{"id":"` + strings.Repeat("1", 32) + `","base":"` + id + `","deleted":["big"]}`
	k2, err := transfer.RemoteManifest(t.Context(), lyingGuest(t, next), "/workspace", k, transfer.Options{})
	if err != nil {
		t.Fatalf("a delta deleting the left-out file: %v", err)
	}
	if len(k2.Manifest.Entries) != 1 || len(k2.Skipped) != 0 {
		t.Errorf("after the delta: %+v, skipped %+v", k2.Manifest.Entries, k2.Skipped)
	}
}

func TestHostileManifestSetuidDropped(t *testing.T) {
	out := entries(`{"path":"x","type":"file","mode":2541,"size":2,` + sumA + `}`) // 0o4755
	m, err := remoteManifest(t.Context(), lyingGuest(t, out), "/workspace", transfer.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if m.Entries[0].Mode != 0o755 {
		t.Fatalf("mode %#o, want 0755", m.Entries[0].Mode)
	}
}

// TestHostileManifestTooManyEntries: 200,000 entries stop at the cap.
func TestHostileManifestTooManyEntries(t *testing.T) {
	var b strings.Builder
	b.WriteString(`{"entries":[`)
	for i := range 200_000 {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"path":"f%06d","type":"file","mode":420,"size":2,%s}`, i, sumA)
	}
	b.WriteString("]}")
	_, err := remoteManifest(t.Context(), lyingGuest(t, b.String()), "/workspace", transfer.Options{Limits: manifest.Limits{MaxEntries: 100_000}})
	if !errors.Is(err, manifest.ErrTooLarge) {
		t.Fatalf("200k entries: %v", err)
	}
	t.Log(err)
}

// TestHostileManifestEndless: a guest that never stops printing is cut
// off at MaxManifestBytes and its command is canceled.
func TestHostileManifestEndless(t *testing.T) {
	r := &localRemote{t: t, exec: func(ctx context.Context, _ string, _ io.Reader, stdout, _ io.Writer) error {
		io.WriteString(stdout, `{"entries":[{"path":"`)
		chunk := bytes.Repeat([]byte("x"), 64<<10)
		for {
			if _, err := stdout.Write(chunk); err != nil {
				return err
			}
			if ctx.Err() != nil {
				return ctx.Err()
			}
		}
	}}
	_, err := remoteManifest(t.Context(), r, "/workspace", transfer.Options{Limits: manifest.Limits{MaxManifestBytes: 4 << 20}})
	if !errors.Is(err, manifest.ErrTooLarge) {
		t.Fatalf("endless manifest: %v", err)
	}
}

// TestRealGuestCaps runs the real manifest subcommand on trees over the
// caps: it stops early, before hashing, and the host reports the cap.
func TestRealGuestCaps(t *testing.T) {
	t.Run("sparse-5GB", func(t *testing.T) {
		// Over the per-file cap: left out by its size, before the guest
		// reads any of it, and named; the rest of the tree comes back.
		ws := t.TempDir()
		f, err := os.Create(filepath.Join(ws, "sparse"))
		must(t, err)
		must(t, f.Truncate(5<<30))
		f.Close()
		must(t, os.WriteFile(filepath.Join(ws, "small"), []byte("a\n"), 0o644))
		start := time.Now()
		k, err := transfer.RemoteManifest(t.Context(), &localRemote{t: t}, ws, transfer.Known{}, transfer.Options{AgentPath: agentBin(t)})
		if err != nil {
			t.Fatalf("5 GB sparse file: %v", err)
		}
		t.Logf("walked in %s", time.Since(start))
		if _, ok := k.Manifest.Lookup("small"); !ok || len(k.Manifest.Entries) != 1 {
			t.Errorf("manifest %+v, want small only", k.Manifest.Entries)
		}
		want := []manifest.Exclusion{{Path: "sparse", Reason: manifest.ReasonTooLarge, Rule: "5368709120 bytes, over the 1073741824-byte cap", Size: 5 << 30}}
		if diff := cmp.Diff(want, k.Skipped); diff != "" {
			t.Errorf("skipped (-want +got):\n%s", diff)
		}
	})
	t.Run("sparse-5GB-total", func(t *testing.T) {
		// With the per-file cap raised, the total cap still fails the
		// collect: it is about the whole, not one file.
		ws := t.TempDir()
		f, err := os.Create(filepath.Join(ws, "sparse"))
		must(t, err)
		must(t, f.Truncate(5<<30))
		f.Close()
		_, err = remoteManifest(t.Context(), &localRemote{t: t}, ws, transfer.Options{AgentPath: agentBin(t), Limits: manifest.Limits{MaxFileSize: 8 << 30}})
		if err == nil || !strings.Contains(err.Error(), "over the limit") {
			t.Fatalf("5 GB sparse file, per-file cap 8 GiB: %v", err)
		}
		t.Log(err)
	})
	t.Run("many-files", func(t *testing.T) {
		ws := t.TempDir()
		for i := range 3000 {
			must(t, os.WriteFile(filepath.Join(ws, fmt.Sprintf("f%d", i)), nil, 0o644))
		}
		_, err := remoteManifest(t.Context(), &localRemote{t: t}, ws, transfer.Options{AgentPath: agentBin(t), Limits: manifest.Limits{MaxEntries: 2000}})
		if err == nil || !strings.Contains(err.Error(), "more than 2000 entries") {
			t.Fatalf("3000 files, cap 2000: %v", err)
		}
		t.Log(err)
	})
}

// fileChange is an Added change for a file of the given content claim.
func fileChange(p string, size int64, sha string) manifest.Change {
	return manifest.Change{Kind: manifest.Added, Path: p, New: &manifest.Entry{Path: p, Type: manifest.File, Mode: 0o644, Size: size, SHA256: sha}}
}

func newStore(t *testing.T) *objects.Store {
	s, err := objects.Open(t.TempDir())
	must(t, err)
	return s
}

func TestHostilePull(t *testing.T) {
	passwd, err := os.ReadFile("/etc/passwd")
	if err != nil {
		testenv.Skip(t, testenv.Unix, err.Error())
	}
	for _, mode := range modes {
		t.Run(string(mode), func(t *testing.T) {
			ws := t.TempDir()
			must(t, os.WriteFile(filepath.Join(ws, "small"), []byte("abc"), 0o644))
			f, err := os.Create(filepath.Join(ws, "sparse"))
			must(t, err)
			must(t, f.Truncate(5<<30))
			f.Close()
			must(t, os.Symlink("/etc/passwd", filepath.Join(ws, "passwd")))
			must(t, syscall.Mkfifo(filepath.Join(ws, "fifo"), 0o644))
			must(t, os.Mkdir(filepath.Join(ws, "dir"), 0o755))
			opts := transfer.Options{Mode: mode, AgentPath: agentBin(t)}
			for _, tc := range []struct {
				name string
				c    manifest.Change
				want error
			}{
				// The guest declared 3 bytes; the file is 5 GB: at most 4
				// bytes are read.
				{"sparse-size-lie", fileChange("sparse", 3, sum([]byte("abc"))), nil},
				{"hash-lie", fileChange("small", 3, sum([]byte("xyz"))), transfer.ErrHostile},
				{"longer-than-declared", fileChange("small", 2, sum([]byte("ab"))), nil},
				{"symlink-to-etc", fileChange("passwd", int64(len(passwd)), sum(passwd)), nil},
				{"fifo", fileChange("fifo", 3, sum([]byte("abc"))), nil},
				{"dir", fileChange("dir", 3, sum([]byte("abc"))), nil},
				{"dot-dot", fileChange("../outside", 3, sum([]byte("abc"))), manifest.ErrInvalid},
				{"giant-declared", fileChange("sparse", 5<<30, sum([]byte("abc"))), manifest.ErrTooLarge},
			} {
				t.Run(tc.name, func(t *testing.T) {
					store := newStore(t)
					_, err := transfer.Pull(t.Context(), &localRemote{t: t}, ws, []manifest.Change{tc.c}, store, opts)
					if err == nil {
						t.Fatal("pulled")
					}
					if tc.want != nil && !errors.Is(err, tc.want) {
						t.Fatalf("got %v, want %v", err, tc.want)
					}
					if n := objectCount(t, store); n != 0 {
						t.Errorf("store holds %d objects after a refused pull", n)
					}
					t.Log(err)
				})
			}
		})
	}
}

func TestPullCaps(t *testing.T) {
	var changes []manifest.Change
	for i := range 20 {
		changes = append(changes, fileChange(fmt.Sprintf("f%d", i), 1, sum([]byte{byte(i)})))
	}
	_, err := transfer.Pull(t.Context(), &localRemote{t: t}, t.TempDir(), changes, newStore(t), transfer.Options{Limits: manifest.Limits{MaxEntries: 10}})
	if !errors.Is(err, manifest.ErrTooLarge) {
		t.Fatalf("20 files, cap 10: %v", err)
	}
	_, err = transfer.Pull(t.Context(), &localRemote{t: t}, t.TempDir(), changes, newStore(t), transfer.Options{Limits: manifest.Limits{MaxTotalBytes: 5}})
	if !errors.Is(err, manifest.ErrTooLarge) {
		t.Fatalf("20 bytes, cap 5: %v", err)
	}
}

// tarStream builds a tar stream from headers, each with body data of its
// Size (zeros unless given).
func tarStream(t *testing.T, entries ...tarEntry) []byte {
	t.Helper()
	var b bytes.Buffer
	tw := tar.NewWriter(&b)
	for _, e := range entries {
		if e.hdr.Size == 0 {
			e.hdr.Size = int64(len(e.body))
		}
		must(t, tw.WriteHeader(&e.hdr))
		if e.body != "" {
			_, err := tw.Write([]byte(e.body))
			must(t, err)
		}
	}
	must(t, tw.Close())
	return b.Bytes()
}

type tarEntry struct {
	hdr  tar.Header
	body string
}

func reg(name, body string) tarEntry {
	return tarEntry{hdr: tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: 0o644}, body: body}
}

// TestHostileTarStream: a guest answering Pull's tar request with a
// stream that is not what was asked.
func TestHostileTarStream(t *testing.T) {
	want := []manifest.Change{fileChange("a", 3, sum([]byte("abc"))), fileChange("b", 3, sum([]byte("def")))}
	for _, tc := range []struct {
		name   string
		stream []tarEntry
	}{
		{"wrong-order", []tarEntry{reg("b", "def"), reg("a", "abc")}},
		{"other-path", []tarEntry{reg("../../etc/cron.d/x", "abc"), reg("b", "def")}},
		{"symlink", []tarEntry{{hdr: tar.Header{Typeflag: tar.TypeSymlink, Name: "a", Linkname: "/etc/passwd"}}, reg("b", "def")}},
		{"size-lie", []tarEntry{reg("a", "abcd"), reg("b", "def")}},
		{"content-lie", []tarEntry{reg("a", "xyz"), reg("b", "def")}},
		{"extra", []tarEntry{reg("a", "abc"), reg("b", "def"), reg("c", "ghi")}},
		{"short", []tarEntry{reg("a", "abc")}},
		{"device", []tarEntry{{hdr: tar.Header{Typeflag: tar.TypeChar, Name: "a", Devmajor: 1, Devminor: 3}}, reg("b", "def")}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			stream := tarStream(t, tc.stream...)
			r := &localRemote{t: t, exec: func(ctx context.Context, _ string, stdin io.Reader, stdout, _ io.Writer) error {
				_, err := stdout.Write(stream)
				return err
			}}
			store := newStore(t)
			_, err := transfer.Pull(t.Context(), r, "/workspace", want, store, transfer.Options{Mode: transfer.ModeTar})
			if !errors.Is(err, transfer.ErrHostile) {
				t.Fatalf("got %v, want ErrHostile", err)
			}
			// The stream stops at the first lie; what came before it was
			// verified and may stay.
			if store.Has(sum([]byte("xyz"))) || store.Has(sum([]byte("abcd"))) || store.Has(sum([]byte("ghi"))) {
				t.Error("store took unverified content")
			}
			t.Log(err)
		})
	}
}

// TestExtractRefuses: the guest's untar refuses streams that would write
// outside its directory or through a link, and drops setuid.
func TestExtractRefuses(t *testing.T) {
	dir := func(name string) tarEntry {
		return tarEntry{hdr: tar.Header{Typeflag: tar.TypeDir, Name: name, Mode: 0o755}}
	}
	link := func(name, target string) tarEntry {
		return tarEntry{hdr: tar.Header{Typeflag: tar.TypeSymlink, Name: name, Linkname: target}}
	}
	for _, tc := range []struct {
		name   string
		stream []tarEntry
	}{
		{"dot-dot", []tarEntry{reg("../escape", "x")}},
		{"absolute", []tarEntry{reg("/tmp/escape", "x")}},
		{"through-symlink", []tarEntry{link("l", "/tmp"), reg("l/escape", "x")}},
		{"through-symlink-dir", []tarEntry{link("l", "."), dir("l/sub")}},
		{"overwrite-symlink", []tarEntry{link("l", "/tmp/escape"), reg("l", "x")}},
		{"duplicate", []tarEntry{reg("a", "x"), reg("a", "y")}},
		{"no-parent", []tarEntry{reg("d/a", "x")}},
		{"hardlink", []tarEntry{{hdr: tar.Header{Typeflag: tar.TypeLink, Name: "h", Linkname: "/etc/passwd"}}}},
		{"device", []tarEntry{{hdr: tar.Header{Typeflag: tar.TypeChar, Name: "null", Devmajor: 1, Devminor: 3}}}},
		{"fifo", []tarEntry{{hdr: tar.Header{Typeflag: tar.TypeFifo, Name: "p"}}}},
		{"git", []tarEntry{dir(".git"), reg(".git/hooks", "x")}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			outside := t.TempDir()
			dest := filepath.Join(outside, "ws")
			_, err := transfer.Extract(t.Context(), dest, bytes.NewReader(tarStream(t, tc.stream...)), transfer.ExtractOptions{})
			if err == nil {
				t.Fatal("extracted")
			}
			t.Log(err)
			if _, err := os.Lstat("/tmp/escape"); err == nil {
				t.Error("/tmp/escape was written")
			}
			if _, err := os.Lstat(filepath.Join(outside, "escape")); err == nil {
				t.Error("wrote next to the destination")
			}
		})
	}
	t.Run("setuid-dropped", func(t *testing.T) {
		dest := filepath.Join(t.TempDir(), "ws")
		e := reg("suid", "x")
		e.hdr.Mode = 0o4755
		d := dir("sticky")
		d.hdr.Mode = 0o1777
		if _, err := transfer.Extract(t.Context(), dest, bytes.NewReader(tarStream(t, e, d)), transfer.ExtractOptions{}); err != nil {
			t.Fatal(err)
		}
		for name, want := range map[string]os.FileMode{"suid": 0o755, "sticky": os.ModeDir | 0o777} {
			info, err := os.Lstat(filepath.Join(dest, name))
			must(t, err)
			if info.Mode() != want {
				t.Errorf("%s: mode %v, want %v", name, info.Mode(), want)
			}
		}
	})
}

func FuzzExtract(f *testing.F) {
	for _, s := range [][]tarEntry{
		{reg("a", "x")},
		{{hdr: tar.Header{Typeflag: tar.TypeDir, Name: "d", Mode: 0o755}}, reg("d/a", "x")},
		{{hdr: tar.Header{Typeflag: tar.TypeSymlink, Name: "l", Linkname: ".."}}, reg("l/x", "x")},
	} {
		f.Add(tarStream(&testing.T{}, s...))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		outside := t.TempDir()
		dest := filepath.Join(outside, "ws")
		transfer.Extract(context.Background(), dest, bytes.NewReader(data), transfer.ExtractOptions{})
		entries, err := os.ReadDir(outside)
		must(t, err)
		if len(entries) != 1 || entries[0].Name() != "ws" {
			t.Fatalf("wrote outside the destination: %v", entries)
		}
		filepath.WalkDir(dest, func(p string, d os.DirEntry, err error) error {
			if err == nil && d.Type()&(os.ModeDevice|os.ModeNamedPipe|os.ModeSocket|os.ModeSetuid) != 0 {
				t.Errorf("%s: %v", p, d.Type())
			}
			return nil
		})
	})
}
