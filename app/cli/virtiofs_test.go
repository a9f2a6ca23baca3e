package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/airlock-dev/airlock/app/pipeline"
	"github.com/airlock-dev/airlock/app/sandbox"
	"github.com/airlock-dev/airlock/review"
	"github.com/airlock-dev/airlock/testkit/testenv"
)

// runJSON runs `airlock run --json` and decodes its result.
func runJSON(t *testing.T, home string, args ...string) runResult {
	t.Helper()
	code, out, errOut := airlockCLI(t, home, append([]string{"run", "--json", "--arch", "amd64"}, args...)...)
	var res runResult
	if err := json.Unmarshal([]byte(out), &res); err != nil || code != 0 || res.Error != "" {
		t.Fatalf("run %v: exit %d, %v\nstdout:\n%s\nstderr:\n%s", args, code, err, out, errOut)
	}
	return res
}

func changesetOf(t *testing.T, home, id string) review.Changeset {
	t.Helper()
	code, out, errOut := airlockCLI(t, home, "diff", id, "--json")
	if code != 0 {
		t.Fatalf("diff %s --json: exit %d: %s", id, code, errOut)
	}
	var cs review.Changeset
	if err := json.Unmarshal([]byte(out), &cs); err != nil {
		t.Fatal(err)
	}
	return cs
}

// TestRunVirtiofs runs the same agent on the same project in a real VM in
// both sync modes: the changesets must be equal, the real project must
// stay untouched until apply, and apply must then give the agent's tree.
func TestRunVirtiofs(t *testing.T) {
	testenv.SkipIfShort(t)
	home := testenv.VMHome(t)
	project := t.TempDir()
	copyTree(t, filepath.Join(testenv.RepoRoot(t), "examples", "demo-project"), project)
	original := treeState(t, project)
	agent := testAgent(t)

	viaCopy := runJSON(t, home, "--project", project, "--sync", "copy", "--script", agent)
	viaShare := runJSON(t, home, "--project", project, "--sync", "virtiofs", "--script", agent)
	if viaCopy.SyncMode != sandbox.SyncCopy || viaShare.SyncMode != sandbox.SyncVirtiofs {
		t.Errorf("sync modes: %q, %q", viaCopy.SyncMode, viaShare.SyncMode)
	}
	if diff := cmp.Diff(original, treeState(t, project)); diff != "" {
		t.Fatalf("a run changed the real project (-before +after):\n%s", diff)
	}
	csCopy, csShare := changesetOf(t, home, viaCopy.Sandbox), changesetOf(t, home, viaShare.Sandbox)
	if len(csShare.Files) != 6 {
		t.Errorf("virtiofs changeset has %d files, want 6", len(csShare.Files))
	}
	if diff := cmp.Diff(csCopy, csShare, cmpopts.IgnoreUnexported(review.File{})); diff != "" {
		t.Errorf("changesets differ (-copy +virtiofs):\n%s", diff)
	}
	if viaShare.Summary == "" || viaShare.Summary != viaCopy.Summary {
		t.Errorf("summaries differ: %q vs %q", viaCopy.Summary, viaShare.Summary)
	}
	if _, err := os.Lstat(filepath.Join(home, "sandboxes", viaShare.Sandbox, pipeline.StagingDir)); !os.IsNotExist(err) {
		t.Errorf("staging clone left after collection: %v", err)
	}

	// ls says which mode each sandbox used.
	_, ls, _ := airlockCLI(t, home, "ls")
	for id, mode := range map[string]string{viaCopy.Sandbox: "copy", viaShare.Sandbox: "virtiofs"} {
		found := false
		for _, l := range strings.Split(ls, "\n") {
			if strings.HasPrefix(l, id) && strings.Contains(l, " "+mode+" ") {
				found = true
			}
		}
		if !found {
			t.Errorf("ls does not show %s as %s:\n%s", id, mode, ls)
		}
	}

	// Apply the virtiofs sandbox: the project becomes the agent's tree, as
	// applying the copy-mode one would make it.
	applied := t.TempDir()
	copyTree(t, project, applied)
	if code, out, errOut := airlockCLI(t, home, "apply", viaShare.Sandbox, "--all"); code != 0 {
		t.Fatalf("apply: exit %d\n%s%s", code, out, errOut)
	}
	afterShare := treeState(t, project)
	if code, out, errOut := airlockCLI(t, home, "undo", viaShare.Sandbox); code != 0 {
		t.Fatalf("undo: exit %d\n%s%s", code, out, errOut)
	}
	if diff := cmp.Diff(original, treeState(t, project)); diff != "" {
		t.Fatalf("undo did not restore the project (-before +after):\n%s", diff)
	}
	if code, out, errOut := airlockCLI(t, home, "apply", viaCopy.Sandbox, "--all"); code != 0 {
		t.Fatalf("apply copy: exit %d\n%s%s", code, out, errOut)
	}
	if diff := cmp.Diff(treeState(t, project), afterShare); diff != "" {
		t.Errorf("applying the two sandboxes gives different trees (-copy +virtiofs):\n%s", diff)
	}
}

// TestRunVirtiofsHostile: a command that plants links out of the share, a
// fifo, a socket-less device attempt and a setuid file in a real VM's
// virtio-fs workspace. Collection records links as links and never follows
// them, leaves the fifo out, drops setuid, and the host is untouched.
func TestRunVirtiofsHostile(t *testing.T) {
	testenv.SkipIfShort(t)
	home := testenv.VMHome(t)
	project := t.TempDir()
	copyTree(t, filepath.Join(testenv.RepoRoot(t), "examples", "demo-project"), project)
	original := treeState(t, project)
	hostFile := filepath.Join(t.TempDir(), "host-secret")
	if err := os.WriteFile(hostFile, []byte("host secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	script := `set -e
ln -s /etc etc-link
ln -s ` + hostFile + ` host-link
ln -s ../../../../../../.. up
mkfifo fifo
mknod null-dev c 1 3 || true
echo x > suid && chmod 4755 suid
echo 'overwritten through the guest' > etc-link/airlock-test 2>/dev/null || true
ls -la /workspace
`
	res := runJSON(t, home, "--project", project, "--sync", "virtiofs", "--", "sh", "-c", script)
	cs := changesetOf(t, home, res.Sandbox)
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
		"etc-link":  "added -rwxrwxrwx -> /etc",
		"host-link": "added -rwxrwxrwx -> " + hostFile,
		"up":        "added -rwxrwxrwx -> ../../../../../../..",
		"suid":      "added -rwxr-xr-x",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("changeset (-want +got):\n%s", diff)
	}
	if _, err := os.Lstat("/etc/airlock-test"); err == nil {
		os.Remove("/etc/airlock-test")
		t.Error("the guest wrote into the host's /etc through a link")
	}
	if b, _ := os.ReadFile(hostFile); string(b) != "host secret\n" {
		t.Errorf("the host file behind a guest link changed: %q", b)
	}
	if diff := cmp.Diff(original, treeState(t, project)); diff != "" {
		t.Errorf("the run changed the real project (-before +after):\n%s", diff)
	}
}
