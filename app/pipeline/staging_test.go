package pipeline

import (
	"bytes"
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/airlock-dev/airlock/app/machine/launch"
	"github.com/airlock-dev/airlock/app/sandbox"
	"github.com/airlock-dev/airlock/review"
	"github.com/airlock-dev/airlock/sync/manifest"
	"github.com/airlock-dev/airlock/sync/objects"
	"github.com/airlock-dev/airlock/vm"
)

// editScript edits, adds, deletes, chmods and makes a symlink.
const editScript = `set -e
echo "second line" >> a.txt
printf 'one\ntwo\nTHREE\n' > b.txt
echo new > sub/c.txt
rm gone.txt
chmod +x run.sh
ln -s a.txt link-to-a
mkdir -p .airlock
echo "edited a and b, added c, removed gone, run.sh executable, a link" > .airlock/summary.md
`

func editProject(t *testing.T) string {
	t.Helper()
	project := newProject(t)
	writeTree(t, project, map[string]string{"run.sh": "echo hi\n", "sub/keep.txt": "keep\n"})
	return project
}

// runMode runs script on project in the fake, in copy or virtiofs mode. In
// virtiofs mode the fake's /workspace is the shared directory itself.
func runMode(t *testing.T, s *sandbox.Store, project string, mode sandbox.SyncMode, script string) (*RunResult, *localMachine, []launch.Share, error) {
	t.Helper()
	m := &localMachine{root: t.TempDir()}
	var got []launch.Share
	res, err := runOnce(context.Background(), s, RunOptions{
		RunSpec: RunSpec{
			Project:    project,
			Script:     []byte(script),
			ScriptName: "agent.sh",
			Image:      "minimal",
			Arch:       "amd64",
			Sync:       mode,
		},
		Hooks: Hooks{
			Boot: func(_ context.Context, a Attach) (Machine, error) {
				shares := a.Shares
				got = shares
				if len(shares) == 1 {
					m.workspace = shares[0].HostPath
				}
				return m, nil
			},
			Transfer: localTransfer{},
		},
	})
	return res, m, got, err
}

func TestRunVirtiofsMatchesCopy(t *testing.T) {
	s := newStore(t)
	project := editProject(t)
	before := snapshotTree(t, project)

	copyRes, _, copyShares, err := runMode(t, s, project, sandbox.SyncCopy, editScript)
	if err != nil {
		t.Fatal(err)
	}
	vfsRes, m, shares, err := runMode(t, s, project, sandbox.SyncVirtiofs, editScript)
	if err != nil {
		t.Fatal(err)
	}
	if len(copyShares) != 0 {
		t.Errorf("copy mode asked for shares %+v", copyShares)
	}
	staging := vfsRes.Sandbox.Path(StagingDir)
	want := []launch.Share{{Share: vm.Share{Tag: WorkspaceTag, HostPath: staging}, Mount: sandbox.Workspace}}
	if diff := cmp.Diff(want, shares); diff != "" {
		t.Errorf("shares (-want +got):\n%s", diff)
	}
	if !m.shutdown {
		t.Error("the machine was not shut down")
	}
	if copyRes.Meta.SyncMode != sandbox.SyncCopy || vfsRes.Meta.SyncMode != sandbox.SyncVirtiofs {
		t.Errorf("sync modes %q, %q", copyRes.Meta.SyncMode, vfsRes.Meta.SyncMode)
	}
	if _, err := os.Lstat(staging); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the staging clone is still there after collection: %v", err)
	}
	// The project is only read.
	if diff := cmp.Diff(before, snapshotTree(t, project)); diff != "" {
		t.Errorf("the project changed (-before +after):\n%s", diff)
	}

	csCopy, err := copyRes.Sandbox.Changeset(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	csVfs, err := vfsRes.Sandbox.Changeset(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(csCopy, csVfs, cmpopts.IgnoreUnexported(review.File{})); diff != "" {
		t.Errorf("virtiofs changeset differs from copy mode's (-copy +virtiofs):\n%s", diff)
	}
	var got []string
	for _, f := range csVfs.Files {
		got = append(got, string(f.Status)+" "+f.Path)
	}
	if want := "added link-to-a, modified a.txt, modified b.txt, deleted gone.txt, mode-changed run.sh, added sub/c.txt"; !sameSet(strings.Join(got, ", "), want) {
		t.Errorf("changeset: %s\nwant the set: %s", strings.Join(got, ", "), want)
	}
	if vfsRes.Summary == "" || vfsRes.Summary != copyRes.Summary {
		t.Errorf("summaries %q and %q", copyRes.Summary, vfsRes.Summary)
	}
	evs, err := vfsRes.Sandbox.ReadAudit()
	if err != nil {
		t.Fatal(err)
	}
	var kinds []string
	for _, e := range evs {
		kinds = append(kinds, string(e.Event))
	}
	if got := strings.Join(kinds, " "); got != "created excluded snapshot pushed limits booted command exit collected" {
		t.Errorf("audit events: %s", got)
	}
}

func sameSet(a, b string) bool {
	split := func(s string) map[string]bool {
		m := map[string]bool{}
		for _, x := range strings.Split(s, ", ") {
			m[x] = true
		}
		return m
	}
	return cmp.Equal(split(a), split(b))
}

// snapshotTree is every path of a tree with its mode and content (or link
// target).
func snapshotTree(t *testing.T, root string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := os.Lstat(p)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		v := fi.Mode().String()
		switch {
		case fi.Mode()&fs.ModeSymlink != 0:
			target, _ := os.Readlink(p)
			v += " -> " + target
		case fi.Mode().IsRegular():
			b, _ := os.ReadFile(p)
			v += " " + string(b)
		}
		out[rel] = v
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestRunVirtiofsHostile: the guest plants links out of the share, a fifo,
// a setuid file and a hard link in the staging clone. Collection records
// the links as links (never followed), leaves the fifo out, drops setuid,
// and nothing outside the sandbox is touched.
func TestRunVirtiofsHostile(t *testing.T) {
	s := newStore(t)
	project := editProject(t)
	outside := t.TempDir()
	secret := filepath.Join(outside, "secret")
	if err := os.WriteFile(secret, []byte("host secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	script := `set -e
ln -s /etc etc
ln -s ` + secret + ` secret
ln -s ../../../.. up
mkfifo fifo
echo x > suid && chmod 4755 suid
ln a.txt hard-a
`
	res, _, _, err := runMode(t, s, project, sandbox.SyncVirtiofs, script)
	if err != nil {
		t.Fatal(err)
	}
	cs, err := res.Sandbox.Changeset(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, f := range cs.Files {
		v := string(f.Status)
		if f.New != nil {
			v += " " + f.New.Mode.String()
			if f.New.Target != "" {
				v += " -> " + f.New.Target
			}
		}
		got[f.Path] = v
	}
	want := map[string]string{
		"etc":    "added -rwxrwxrwx -> /etc",
		"secret": "added -rwxrwxrwx -> " + secret,
		"up":     "added -rwxrwxrwx -> ../../../..",
		"suid":   "added -rwxr-xr-x",
		"hard-a": "added -rw-r--r--",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("changeset (-want +got):\n%s", diff)
	}
	if b, _ := os.ReadFile(secret); string(b) != "host secret\n" {
		t.Errorf("the host file behind a guest link changed: %q", b)
	}
	audit, _ := os.ReadFile(res.Sandbox.Path("audit.jsonl"))
	if bytes.Contains(audit, []byte("host secret")) {
		t.Error("the content behind a guest link reached the audit log")
	}
}

// TestStoreHostileRefusesLinks: a file the manifest saw, swapped for a
// link or a fifo before it is read, is refused, never followed.
func TestStoreHostileRefusesLinks(t *testing.T) {
	dir := t.TempDir()
	store, err := objects.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	outside := filepath.Join(t.TempDir(), "passwd")
	os.WriteFile(outside, []byte("root:x:0:0\n"), 0o644)
	os.Symlink(outside, filepath.Join(dir, "f"))
	syscall.Mkfifo(filepath.Join(dir, "p"), 0o644)
	os.Mkdir(filepath.Join(dir, "d"), 0o755)
	os.Symlink(filepath.Dir(outside), filepath.Join(dir, "d2"))
	root, err := os.OpenRoot(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	sum := "4e1ab8fdbd2bd8b5c0b7d7aa2b4fd4fc4ad1dcbbff85cb0e5cda28a6f8b0b0ea"
	for _, p := range []string{"f", "p", "d2/passwd"} {
		err := storeHostile(root, manifest.Entry{Path: p, Type: manifest.File, Mode: 0o644, Size: 11, SHA256: sum}, store)
		if err == nil {
			t.Errorf("%s: stored", p)
		}
	}
	if store.Has(sum) {
		t.Error("something was stored")
	}
}

// TestCloneBaseline: the staging clone has the baseline's files, modes,
// directories and links, and shares no inode with the content store, so
// the guest cannot write into the store through it.
func TestCloneBaseline(t *testing.T) {
	project := t.TempDir()
	writeTree(t, project, map[string]string{"a.txt": "a\n", "ro/b.txt": "b\n", "x.sh": "#!/bin/sh\n", "same.txt": "a\n"})
	os.Chmod(filepath.Join(project, "x.sh"), 0o755)
	os.Chmod(filepath.Join(project, "ro"), 0o555)
	os.Symlink("a.txt", filepath.Join(project, "l"))
	base, _, err := manifest.Walk(context.Background(), project, manifest.WalkOptions{})
	if err != nil {
		t.Fatal(err)
	}
	store, err := objects.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if err := objects.SnapshotTree(context.Background(), project, base, store); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "staging")
	var last [2]int
	st, err := CloneBaseline(context.Background(), dir, base, store, func(done, total int) { last = [2]int{done, total} })
	if err != nil {
		t.Fatal(err)
	}
	if st.Files != 4 || st.Dirs != 1 || st.Symlinks != 1 || last != [2]int{5, 5} {
		t.Errorf("stats %+v, last progress %v", st, last)
	}
	if diff := cmp.Diff(snapshotTree(t, project), snapshotTree(t, dir)); diff != "" {
		t.Errorf("clone differs from the project (-project +clone):\n%s", diff)
	}
	for _, e := range base.Entries {
		if e.Type != manifest.File {
			continue
		}
		var cl, ob syscall.Stat_t
		obj, _ := store.Path(e.SHA256)
		if err := syscall.Stat(filepath.Join(dir, e.Path), &cl); err != nil {
			t.Fatal(err)
		}
		if err := syscall.Stat(obj, &ob); err != nil {
			t.Fatal(err)
		}
		if cl.Ino == ob.Ino || cl.Nlink != 1 {
			t.Errorf("%s: the clone shares its inode with the store (nlink %d)", e.Path, cl.Nlink)
		}
	}
	// Writing the clone leaves the store alone.
	os.WriteFile(filepath.Join(dir, "a.txt"), []byte("changed\n"), 0o644)
	if err := store.Verify(base.Entries[0].SHA256); err != nil {
		t.Errorf("store object changed: %v", err)
	}
	if _, err := CloneBaseline(context.Background(), dir, base, store, nil); err == nil {
		t.Error("a second clone into an existing directory worked")
	}
}

// TestRunRefusesAnUnplannedSyncMode: the pipeline carries out the
// plan's sync mode and picks none of its own: an empty or unknown one is
// refused before anything is made.
func TestRunRefusesAnUnplannedSyncMode(t *testing.T) {
	s := newStore(t)
	for _, mode := range []sandbox.SyncMode{"", "nfs"} {
		if _, err := runOnce(context.Background(), s, RunOptions{
			RunSpec: RunSpec{Project: t.TempDir(), Command: []string{"true"}, Sync: mode},
			Hooks:   Hooks{Boot: func(context.Context, Attach) (Machine, error) { return nil, errors.New("not reached") }},
		}); err == nil || !strings.Contains(err.Error(), "sync mode") {
			t.Errorf("run with sync mode %q: %v", mode, err)
		}
	}
	if infos, _ := s.List(); len(infos) != 0 {
		t.Errorf("sandboxes were made: %+v", infos)
	}
}

func TestMounted(t *testing.T) {
	proc := "rootfs / rootfs rw 0 0\nworkspace /workspace virtiofs rw,nosuid,nodev,relatime 0 0\n"
	if !mounted(proc, "workspace", "/workspace", "virtiofs") {
		t.Error("not found")
	}
	if mounted(proc, "workspace", "/w", "virtiofs") || mounted("workspace /workspace tmpfs rw 0 0\n", "workspace", "/workspace", "virtiofs") {
		t.Error("false positive")
	}
}

func TestMountedExt4(t *testing.T) {
	proc := "rootfs / rootfs rw 0 0\n/dev/vda /workspace ext4 rw,nosuid,nodev,relatime 0 0\n"
	if !mounted(proc, "", "/workspace", "ext4") || mounted(proc, "", "/workspace", "virtiofs") {
		t.Error("mounted(ext4) is wrong")
	}
}
