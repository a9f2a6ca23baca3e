package cli

import (
	"encoding/json"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"runtime/debug"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/airlock-dev/airlock/app/sandbox"
	"github.com/airlock-dev/airlock/review"
	"github.com/airlock-dev/airlock/sync/manifest"
	"github.com/airlock-dev/airlock/testkit/testenv"
)

// hostileSetup is a project two levels below a directory whose every
// path is recorded, so that anything written outside the project (or the
// Airlock home) shows up.
func hostileSetup(t *testing.T) (home, outside, project string, before map[string]entry) {
	t.Helper()
	home = testenv.VMHome(t)
	outside = t.TempDir()
	project = filepath.Join(outside, "a", "b", "project")
	if err := os.MkdirAll(project, 0o755); err != nil {
		t.Fatal(err)
	}
	writeFiles(t, project, map[string]string{"README.md": "# hostile\n", "src/main.go": "package main\n"})
	if err := os.WriteFile(filepath.Join(outside, "a", "canary"), []byte("untouched\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return home, outside, project, treeState(t, outside)
}

func writeFiles(t *testing.T, root string, files map[string]string) {
	t.Helper()
	for p, c := range files {
		full := filepath.Join(root, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// checkOutside fails when anything outside the project changed.
func checkOutside(t *testing.T, outside, project string, before map[string]entry) {
	t.Helper()
	after := treeState(t, outside)
	rel, _ := filepath.Rel(outside, project)
	for p, e := range after {
		if p == rel || strings.HasPrefix(p, rel+"/") {
			continue
		}
		if b, ok := before[p]; !ok || b != e {
			t.Errorf("written outside the project: %s (%+v)", p, e)
		}
	}
	for p := range before {
		if _, ok := after[p]; !ok {
			t.Errorf("removed outside the project: %s", p)
		}
	}
}

// checkHomeLayout fails when the run wrote into the Airlock home anywhere
// but its own state directories.
func checkHomeLayout(t *testing.T, home string) {
	t.Helper()
	des, err := os.ReadDir(home)
	if err != nil {
		t.Fatal(err)
	}
	// caches: the project's cache disk, which the guest writes and only a
	// later guest reads.
	// keys: the audit key (keys/audit.key), 0600 in a 0700 folder.
	allowed := map[string]bool{"images": true, "cache": true, "objects": true, "sandboxes": true, "run": true, "caches": true, "keys": true}
	for _, de := range des {
		if !allowed[de.Name()] {
			t.Errorf("unexpected entry in the Airlock home: %s", de.Name())
		}
	}
	checkKeyModes(t, home)
}

// checkKeyModes fails when the home's audit key is readable by others: the
// key 0600, its folder 0700. A home without one is fine.
func checkKeyModes(t *testing.T, home string) {
	t.Helper()
	for p, want := range map[string]os.FileMode{filepath.Join(home, "keys"): 0o700, filepath.Join(home, "keys", "audit.key"): 0o600} {
		fi, err := os.Stat(p)
		if os.IsNotExist(err) {
			continue
		}
		if err != nil {
			t.Error(err)
		} else if fi.Mode().Perm() != want {
			t.Errorf("%s: mode %v, want %v", p, fi.Mode().Perm(), want)
		}
	}
}

// resetPeakRSS starts peakRSS over (Linux: writing 5 to clear_refs
// resets VmHWM), so that it measures one run, not an image build before.
func resetPeakRSS() { os.WriteFile("/proc/self/clear_refs", []byte("5"), 0) }

// peakRSS is the test process's peak resident memory (VmHWM), in bytes.
func peakRSS(t *testing.T) int64 {
	t.Helper()
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(data), "\n") {
		if f := strings.Fields(line); len(f) == 3 && f[0] == "VmHWM:" {
			kb, _ := strconv.ParseInt(f[1], 10, 64)
			return kb << 10
		}
	}
	return 0
}

// onlySandbox returns the single sandbox of home.
func onlySandbox(t *testing.T, home string) (*sandbox.Sandbox, sandbox.Meta) {
	t.Helper()
	s, err := sandbox.Open(home)
	if err != nil {
		t.Fatal(err)
	}
	ids, err := s.IDs()
	if err != nil || len(ids) != 1 {
		t.Fatalf("sandboxes: %v, %v", ids, err)
	}
	sb, err := s.Get(ids[0])
	if err != nil {
		t.Fatal(err)
	}
	m, err := sb.Meta()
	if err != nil {
		t.Fatal(err)
	}
	return sb, m
}

// TestHostileGuestLinksFifoSetuid runs, through the whole pipeline in a
// real VM, a command that makes symlinks out of the workspace (to /etc,
// to ../../), writes through a directory symlink, makes a fifo and a
// setuid file. The links come back as links, never followed; apply
// creates the one that stays in the project as a link and reports the
// ones that leave it as skipped; the fifo is left out, the setuid bit is
// dropped, and nothing is written outside the project.
func TestHostileGuestLinksFifoSetuid(t *testing.T) {
	testenv.SkipIfShort(t)
	home, outside, project, before := hostileSetup(t)
	os.Remove("/tmp/airlock-hostile-escaped.txt")
	agent := `set -e
ln -s /etc etc-link
ln -s ../../ up-link
ln -s /tmp dir-link
ln -s src/main.go in-link
echo escaped > dir-link/airlock-hostile-escaped.txt
mkdir -p sub && ln -s ../.. sub/up2 && echo through > sub/up2/airlock-hostile-through.txt || true
mkfifo fifo
echo '#!/bin/sh' > suid.sh && chmod 4755 suid.sh
echo 'package main // edited' > src/main.go
echo done`
	code, out, errOut := airlockCLI(t, home, "run", "--arch", "amd64", "--project", project, "--", "sh", "-c", agent)
	if code != 0 {
		t.Fatalf("run: exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
	sb, meta := onlySandbox(t, home)
	if meta.Status != sandbox.StatusReady {
		t.Fatalf("sandbox status %s (%s)", meta.Status, meta.Error)
	}
	// The fifo is left out, and the user is told so, on the terminal and
	// in the audit log.
	if !strings.Contains(errOut, `left out of the changes (1): "fifo" (special file p`) {
		t.Errorf("the run did not report the fifo it left out:\n%s", errOut)
	}
	if audit, err := os.ReadFile(sb.Path("audit.jsonl")); err != nil || !strings.Contains(string(audit), `"event":"skipped"`) || !strings.Contains(string(audit), `"path":"fifo"`) {
		t.Errorf("the audit log does not record the skipped fifo (%v)", err)
	}

	// The guest's manifest as stored: links recorded, nothing under them,
	// no fifo, no setuid bit.
	f, err := os.Open(sb.Path(sandbox.GuestFile))
	if err != nil {
		t.Fatal(err)
	}
	gm, err := manifest.Decode(f, manifest.Limits{})
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	for p, target := range map[string]string{"etc-link": "/etc", "up-link": "../../", "dir-link": "/tmp", "sub/up2": "../..", "in-link": "src/main.go"} {
		e, ok := gm.Lookup(p)
		if !ok || e.Type != manifest.Symlink || e.Target != target {
			t.Errorf("%s: %+v, want a symlink to %s", p, e, target)
		}
	}
	for _, e := range gm.Entries {
		if strings.HasPrefix(e.Path, "dir-link/") || strings.HasPrefix(e.Path, "sub/up2/") || strings.HasPrefix(e.Path, "etc-link/") || e.Path == "fifo" {
			t.Errorf("manifest has %s (%s): links must not be followed, fifos must be left out", e.Path, e.Type)
		}
		if e.Mode&^fs.ModePerm != 0 {
			t.Errorf("%s: mode %v keeps special bits", e.Path, e.Mode)
		}
	}
	if e, ok := gm.Lookup("suid.sh"); !ok || e.Mode != 0o755 {
		t.Errorf("suid.sh: %+v, want mode 0755 without setuid", e)
	}

	// The changeset, then apply everything: links are created as links.
	code, out, errOut = airlockCLI(t, home, "diff", meta.ID, "--json")
	if code != 0 {
		t.Fatalf("diff: exit %d: %s", code, errOut)
	}
	var cs review.Changeset
	if err := json.Unmarshal([]byte(out), &cs); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, f := range cs.Files {
		got = append(got, string(f.Status)+" "+f.Path)
	}
	want := []string{"added dir-link", "added etc-link", "added in-link", "modified src/main.go", "added sub/up2", "added suid.sh", "added up-link"}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("changeset:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	// Links that leave the project are reported and not created; one
	// that stays inside is created as a link. suid.sh is executable, so
	// it runs on the host: --all alone would leave it out, and what is
	// tested here is that applying it drops the setuid bit.
	code, out, errOut = airlockCLI(t, home, "apply", meta.ID, "--all", "--include-host-exec")
	if code != 0 {
		t.Fatalf("apply: exit %d\n%s\n%s", code, out, errOut)
	}
	for _, p := range []string{"dir-link", "etc-link", "sub/up2", "up-link"} {
		if !strings.Contains(out, "skipped   "+p+": symbolic link "+p+" points outside the project") {
			t.Errorf("apply does not report the escaping link %s:\n%s", p, out)
		}
		if _, err := os.Lstat(filepath.Join(project, p)); err == nil {
			t.Errorf("the escaping link %s was created in the project", p)
		}
	}
	if got, err := os.Readlink(filepath.Join(project, "in-link")); err != nil || got != "src/main.go" {
		t.Errorf("applied in-link: %q, %v; want a link to src/main.go", got, err)
	}
	if fi, err := os.Lstat(filepath.Join(project, "suid.sh")); err != nil || fi.Mode() != 0o755 {
		t.Errorf("applied suid.sh: %v, %v; want -rwxr-xr-x", fi.Mode(), err)
	}
	if _, err := os.Lstat(filepath.Join(project, "fifo")); err == nil {
		t.Error("the fifo reached the project")
	}
	if _, err := os.Lstat("/tmp/airlock-hostile-escaped.txt"); err == nil {
		t.Error("the write through the guest's directory link reached the host's /tmp")
	}
	checkOutside(t, outside, project, before)
	checkHomeLayout(t, home)
}

// TestHostileGuestHugeSparseFile: a 5 GB sparse file (next to links out
// of the workspace) with the per-file cap raised is over the cap on the
// total (4 GiB): the run ends with a clear error, the sandbox is kept,
// marked failed, for inspection, nothing is pulled and nothing is written
// outside the project. (Over the per-file cap, a file is left out and the
// rest is collected: TestHugeSparseFileLeftOut.)
func TestHostileGuestHugeSparseFile(t *testing.T) {
	testenv.SkipIfShort(t)
	for _, tc := range []struct {
		name  string
		flags []string
		want  []string
	}{
		{"total cap", []string{"--max-file-size", "8G"}, []string{"add up to 5368709", "over the limit of 4294967296"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			home, outside, project, before := hostileSetup(t)
			agent := `set -e; ln -s /etc etc-link; ln -s ../../ up-link; truncate -s 5G sparse.bin; ls -l sparse.bin`
			resetPeakRSS()
			start := time.Now()
			args := append([]string{"run", "--arch", "amd64"}, tc.flags...)
			args = append(args, "--project", project, "--", "sh", "-c", agent)
			code, out, errOut := airlockCLI(t, home, args...)
			t.Logf("run took %s, peak RSS %d MiB", time.Since(start).Round(time.Millisecond), peakRSS(t)>>20)
			if code != ExitError {
				t.Fatalf("run: exit %d, want %d\nstdout:\n%s\nstderr:\n%s", code, ExitError, out, errOut)
			}
			sb, meta := onlySandbox(t, home)
			for _, s := range append(tc.want, "kept for inspection: airlock logs "+meta.ID) {
				if !strings.Contains(errOut, s) {
					t.Errorf("the error does not say %q:\n%s", s, errOut)
				}
			}
			if meta.Status != sandbox.StatusFailed || !strings.Contains(meta.Error, "over the limit") {
				t.Errorf("sandbox: status %s, error %q; want failed, over the limit", meta.Status, meta.Error)
			}
			if _, err := os.Stat(sb.Path(sandbox.TranscriptFile)); err != nil {
				t.Errorf("the sandbox was not kept for inspection: %v", err)
			}
			var objects int64
			filepath.WalkDir(filepath.Join(home, "objects"), func(p string, d fs.DirEntry, err error) error {
				if err == nil && d.Type().IsRegular() {
					if fi, err := d.Info(); err == nil {
						objects += fi.Size()
					}
				}
				return nil
			})
			if objects > 1<<20 {
				t.Errorf("the content store holds %d bytes after a refused collect", objects)
			}
			checkOutside(t, outside, project, before)
			checkHomeLayout(t, home)
		})
	}
}

// TestHugeSparseFileLeftOut is item 6 of issue 19 as the attack: the
// command grows a baseline file to 3 GiB (sparse), makes a new 3 GiB one
// and edits another file. One bad file never sinks the review: the run
// exits with the command's code (0), names both files with their size and
// the cap (terminal, --json's skipped, the audit log), and apply --all
// applies the edit; the baseline's big.bin is not deleted and new.bin
// never reaches the project.
func TestHugeSparseFileLeftOut(t *testing.T) {
	testenv.SkipIfShort(t)
	const agent = `set -e; truncate -s 3G big.bin; truncate -s 3G new.bin; echo edited >> src/main.go; ls -ls big.bin new.bin`
	setup := func(t *testing.T) (home, outside, project string, before map[string]entry) {
		home, outside, project, _ = hostileSetup(t)
		writeFiles(t, project, map[string]string{"big.bin": "small\n"})
		return home, outside, project, treeState(t, outside)
	}
	t.Run("terminal", func(t *testing.T) {
		home, outside, project, before := setup(t)
		start := time.Now()
		code, out, errOut := airlockCLI(t, home, "run", "--arch", "amd64", "--project", project, "--", "sh", "-c", agent)
		t.Logf("run took %s", time.Since(start).Round(time.Millisecond))
		for _, line := range strings.Split(errOut, "\n") {
			if strings.Contains(line, "left out") {
				t.Log(line)
			}
		}
		if code != 0 {
			t.Fatalf("run: exit %d, want the command's 0\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
		}
		for _, s := range []string{`"big.bin" (3.0 GiB, over the 1.0 GiB cap)`, `"new.bin" (3.0 GiB, over the 1.0 GiB cap)`, "--max-file-size"} {
			if !strings.Contains(errOut, s) {
				t.Errorf("the run does not say %q:\n%s", s, errOut)
			}
		}
		sb, meta := onlySandbox(t, home)
		if meta.Status != sandbox.StatusReady || meta.Changes == nil || meta.Changes.Files != 1 {
			t.Fatalf("sandbox: status %s, changes %+v; want ready, 1 file", meta.Status, meta.Changes)
		}
		evs, err := sb.ReadAudit()
		if err != nil {
			t.Fatal(err)
		}
		var skipped string
		for _, e := range evs {
			if e.Event == sandbox.EventSkipped {
				b, _ := json.Marshal(e.Data)
				skipped = string(b)
			}
		}
		if !strings.Contains(skipped, `"path":"big.bin","reason":"too-large","rule":"3221225472 bytes, over the 1073741824-byte cap","size":3221225472`) {
			t.Errorf("audit: skipped event %s", skipped)
		}
		if code, out, errOut := airlockCLI(t, home, "apply", meta.ID, "--all"); code != 0 {
			t.Fatalf("apply --all: exit %d\n%s\n%s", code, out, errOut)
		}
		for p, want := range map[string]string{"src/main.go": "package main\nedited\n", "big.bin": "small\n"} {
			if got, err := os.ReadFile(filepath.Join(project, p)); err != nil || string(got) != want {
				t.Errorf("%s after apply: %q, %v; want %q", p, got, err, want)
			}
		}
		if _, err := os.Lstat(filepath.Join(project, "new.bin")); err == nil {
			t.Error("new.bin, left out, reached the project")
		}
		checkOutside(t, outside, project, before)
		checkHomeLayout(t, home)
	})
	t.Run("json", func(t *testing.T) {
		home, _, project, _ := setup(t)
		code, out, errOut := airlockCLI(t, home, "--json", "run", "--arch", "amd64", "--project", project, "--", "sh", "-c", agent)
		if code != 0 {
			t.Fatalf("run --json: exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
		}
		var res runResult
		if err := json.Unmarshal([]byte(out), &res); err != nil {
			t.Fatalf("run --json printed %q: %v", out, err)
		}
		want := []manifest.Exclusion{
			{Path: "big.bin", Reason: manifest.ReasonTooLarge, Rule: "3221225472 bytes, over the 1073741824-byte cap", Size: 3 << 30},
			{Path: "new.bin", Reason: manifest.ReasonTooLarge, Rule: "3221225472 bytes, over the 1073741824-byte cap", Size: 3 << 30},
		}
		if res.ExitCode != 0 || res.Changes == nil || res.Changes.Files != 1 || !reflect.DeepEqual(res.Skipped, want) {
			t.Errorf("run --json: exit %d, changes %+v, skipped %+v; want 0, 1 file, %+v", res.ExitCode, res.Changes, res.Skipped, want)
		}
	})
}

// TestHostileGuestManyFiles: 25,000 new files come back as a changeset
// the host handles (within the default caps) in memory that grows by a
// bounded amount per file, and nothing is written outside the project.
// Creating the files under TCG is most of its time (1 to 2 ms each,
// busybox touch); 100,000 took 285 s for nothing a quarter of them does
// not prove: the bound is per file, above the test process's memory
// when the run starts (the image built before it is not the run's). The
// whole run grew by 70 MiB for 100,000 files with -race (about 730
// bytes a file); before the collect's and the changeset's per-file costs
// were cut, by about 5.6 KiB a file (one profiled run).
func TestHostileGuestManyFiles(t *testing.T) {
	testenv.SkipIfShort(t)
	home, outside, project, before := hostileSetup(t)
	const (
		n = 25_000
		// What a run costs whatever it collects, and the bound per file.
		runBytes     = 64 << 20
		bytesPerFile = 4 << 10
	)
	agent := `set -e; mkdir many; cd many; seq 1 ` + strconv.Itoa(n) + ` | xargs touch; ls | wc -l`
	debug.FreeOSMemory()
	resetPeakRSS()
	startRSS := peakRSS(t)
	start := time.Now()
	code, out, errOut := airlockCLI(t, home, "run", "--arch", "amd64", "--memory", "2048", "--project", project, "--", "sh", "-c", agent)
	rss := peakRSS(t)
	t.Logf("run took %s, peak RSS %d MiB, %d MiB over its start (%d bytes a file)",
		time.Since(start).Round(time.Millisecond), rss>>20, (rss-startRSS)>>20, (rss-startRSS)/n)
	if code != 0 {
		t.Fatalf("run: exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
	if !strings.Contains(out, strconv.Itoa(n)) {
		t.Errorf("the command did not make %d files:\n%s", n, out)
	}
	_, meta := onlySandbox(t, home)
	if meta.Status != sandbox.StatusReady || meta.Changes == nil || meta.Changes.Files != n {
		t.Errorf("sandbox: status %s, changes %+v; want ready with %d files", meta.Status, meta.Changes, n)
	}
	if grew := rss - startRSS; grew > runBytes+n*bytesPerFile {
		t.Errorf("peak RSS grew by %d MiB for %d files, over %d MiB and %d bytes a file", grew>>20, n, runBytes>>20, bytesPerFile)
	}
	if rss > 1<<30 {
		t.Errorf("peak RSS %d MiB for %d files", rss>>20, n)
	}
	checkOutside(t, outside, project, before)
	checkHomeLayout(t, home)
}
