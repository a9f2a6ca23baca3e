package clitest

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/airlock-dev/airlock/app/cli"
	"github.com/airlock-dev/airlock/app/egress"
	"github.com/airlock-dev/airlock/app/home"
	"github.com/airlock-dev/airlock/app/pipeline"
	"github.com/airlock-dev/airlock/app/plan"
	"github.com/airlock-dev/airlock/app/sandbox"
	"github.com/airlock-dev/airlock/testkit/fakevendor"
	"github.com/airlock-dev/airlock/testkit/testenv"
	"github.com/airlock-dev/airlock/vm"
	"github.com/airlock-dev/airlock/vm/image"
)

// AgentCase is one agent CLI's proof: its preset, the fake of its
// vendor's API, and where its credential lives and travels.
type AgentCase struct {
	// Agent is the preset: claude, codex, gemini.
	Agent string
	// Vendor is the fake API, reached under the vendor's real host name.
	Vendor fakevendor.Vendor
	// Secret is the host's variable holding the credential
	// (ANTHROPIC_API_KEY); Value, when set, is its value (else random).
	Secret, Value string
	// Login, when set, signs in with a subscription instead of Secret:
	// it puts the CLI's own sign-in on the host (under a home of the
	// test's, as $HOME) with token as its access token.
	Login func(t *testing.T, home, token string)
	// Hidden are other values of the host's sign-in that must be nowhere
	// in the sandbox either (a login's refresh token).
	Hidden []string
	// Credential is the credential a request carried to the vendor, as
	// the vendor reads it (a header's value without its scheme).
	Credential func(fakevendor.Request) string
	// Model says whether a request is a model call (one that carries the
	// conversation); nil takes every request.
	Model func(fakevendor.Request) bool
}

// AgentScript is what every fake has the agent do: write a file with
// the CLI's own tool and run a shell command whose output comes back.
// The output is not in the command's text, so it comes back only if the
// command ran; the command has no "$(", which Gemini CLI refuses to run
// (it takes arithmetic expansion for command substitution).
var AgentScript = fakevendor.Script{
	Dir:     "/workspace",
	File:    "notes/hello.txt",
	Content: "Hello from the scripted model.\nA second line.\n",
	Shell:   "expr 6 '*' 7 | sed 's/^/airlock-shell-/' | tee shell.out",
	Final:   "I wrote notes/hello.txt and ran the shell check; this is the final message.",
}

// ShellOutput is what AgentScript's command prints.
const ShellOutput = "airlock-shell-42"

// UpstreamHook makes every run of a plan reach srv for the vendors'
// host names (the proxy verifies srv's certificates against its CA).
func UpstreamHook(srv *fakevendor.Server) cli.Option {
	return cli.WithPlanHook(func(p *plan.Plan) error {
		for i := range p.Runs {
			if n := p.Runs[i].Network; n != nil {
				n.Dial, n.RootCAs = srv.Dial, srv.RootCAs
			}
		}
		return nil
	})
}

// FullHome is an Airlock home of its own that shares the test images,
// with the full image built.
func FullHome(t testing.TB) (string, *image.Image) {
	t.Helper()
	im := testenv.FullImage(t, vm.AMD64)
	return testenv.VMHome(t), im
}

// AgentCLITest runs c's real CLI from the full image on a small project
// through the real egress proxy with secret injection, against its fake
// vendor, and checks what the issue asks of every CLI: the file and the
// shell command's output in the changeset, the real credential on every
// upstream request and never a placeholder, the credential nowhere in the
// sandbox, the final message as the rationale, and a reply round that
// continues the conversation. It returns the sandbox and the server for
// a CLI's own checks.
func AgentCLITest(t *testing.T, c AgentCase) (*sandbox.Sandbox, *fakevendor.Server) {
	t.Helper()
	testenv.SkipIfShort(t)
	h, _ := FullHome(t)
	proj := t.TempDir()
	if err := os.WriteFile(filepath.Join(proj, "README.md"), []byte("# A small project\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	secret := c.Value
	if secret == "" {
		secret = "sk-airlock-test-" + RandomHex(t, 24)
	}
	for _, k := range []string{"ANTHROPIC_API_KEY", "CLAUDE_CODE_OAUTH_TOKEN", "CODEX_API_KEY", "GEMINI_API_KEY"} {
		t.Setenv(k, "")
	}
	if c.Login != nil {
		userHome := t.TempDir()
		t.Setenv("HOME", userHome)
		c.Login(t, userHome, secret)
	} else {
		t.Setenv(c.Secret, secret)
	}
	srv := fakevendor.Start(t, AgentScript, c.Vendor)
	opts := []cli.Option{UpstreamHook(srv)}

	code, out, errOut := Run(t, h, opts, "--json", "run", "--arch", "amd64", "--project", proj,
		"--agent", c.Agent, "--prompt", "Write notes/hello.txt and run the shell check.")
	if code != 0 {
		// The CLI's own words (a flag it no longer knows, say) are in
		// its transcript.
		t.Fatalf("run --agent %s: exit %d\n%s\n%s\nthe agent's transcript:\n%s\nrequests:\n%s", c.Agent, code, out, errOut, lastTranscript(t, h), RequestList(srv))
	}
	t.Logf("requests of the run:\n%s", RequestList(srv))
	st, err := sandbox.Open(h)
	if err != nil {
		t.Fatal(err)
	}
	sb, err := st.Get(sandboxOf(t, out))
	if err != nil {
		t.Fatal(err)
	}
	cs, err := sb.Changeset(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	for path, want := range map[string]string{AgentScript.File: AgentScript.Content, "shell.out": ShellOutput + "\n"} {
		f := cs.File(path)
		if f == nil {
			t.Errorf("the changeset lacks %s (%d files)", path, len(cs.Files))
		} else if got := string(f.NewContent()); got != want {
			t.Errorf("%s in the changeset is %q, want %q", path, got, want)
		}
	}
	if !slices.ContainsFunc(srv.Requests(), func(r fakevendor.Request) bool { return bytes.Contains(r.Body, []byte(ShellOutput)) }) {
		t.Errorf("no request carried the shell command's output %q back to the model", ShellOutput)
	}
	final, err := sb.FinalMessage()
	if err != nil || strings.TrimSpace(final) != AgentScript.Final {
		t.Errorf("the rationale shown is %q (%v), want the agent's final message %q", final, err, AgentScript.Final)
	}
	checkCredentials(t, c, srv, secret)
	checkNoSecret(t, h, sb, append([]string{secret}, c.Hidden...)...)

	// A reply round continues the same conversation: the model sees the
	// earlier turns with the new message.
	before := len(srv.Requests())
	const message = "Thanks; now say goodbye in the final message too."
	code, out, errOut = Run(t, h, opts, "reply", sb.ID, "--message", message)
	if code != 0 {
		t.Fatalf("reply: exit %d\n%s\n%s\nrequests:\n%s", code, out, errOut, RequestList(srv))
	}
	continued := false
	for _, r := range srv.Requests()[before:] {
		if bytes.Contains(r.Body, []byte("goodbye in the final message")) && bytes.Contains(r.Body, []byte(AgentScript.Final)) {
			continued = true
		}
	}
	if !continued {
		t.Errorf("no request of the reply round carried the earlier turns (the first round's final message) with the reply:\n%s", RequestList(srv))
	}
	checkCredentials(t, c, srv, secret)
	checkNoSecret(t, h, sb, append([]string{secret}, c.Hidden...)...)
	return sb, srv
}

// EgressRecords are the proxy's records in sb's audit log (the run's
// and its rounds'), logged for the reader of the test.
func EgressRecords(t *testing.T, sb *sandbox.Sandbox) []egress.Record {
	t.Helper()
	evs, err := sb.ReadAudit()
	if err != nil {
		t.Fatal(err)
	}
	var recs []egress.Record
	var lines strings.Builder
	for _, ev := range evs {
		if ev.Event != pipeline.EventEgress {
			continue
		}
		data, err := json.Marshal(ev.Data)
		if err != nil {
			t.Fatal(err)
		}
		var rec egress.Record
		if err := json.Unmarshal(data, &rec); err != nil {
			t.Fatalf("an egress record of the audit log: %v", err)
		}
		recs = append(recs, rec)
		lines.WriteString("  " + rec.String() + "\n")
	}
	t.Logf("the proxy's records:\n%s", lines.String())
	return recs
}

// lastTranscript is the transcript of the newest sandbox in h.
func lastTranscript(t *testing.T, h string) string {
	st, err := sandbox.Open(h)
	if err != nil {
		return err.Error()
	}
	list, err := st.List()
	if err != nil || len(list) == 0 {
		return fmt.Sprintf("(no sandbox: %v)", err)
	}
	sb, err := st.Get(list[0].ID)
	if err != nil {
		return err.Error()
	}
	tr, err := sb.Transcript()
	if err != nil {
		return err.Error()
	}
	return string(tr)
}

// checkCredentials: every request reached the fake with the real
// credential, and no placeholder ever left the host.
func checkCredentials(t *testing.T, c AgentCase, srv *fakevendor.Server, secret string) {
	t.Helper()
	reqs := srv.Requests()
	if len(reqs) == 0 {
		t.Fatal("the fake vendor received no request")
	}
	models := 0
	for _, r := range reqs {
		if c.Model == nil || c.Model(r) {
			models++
		}
		if got := c.Credential(r); got != secret {
			t.Errorf("%s %s%s carried credential %q, want the real one", r.Method, r.Host, r.Path, Abbreviate(got))
		}
		var all bytes.Buffer
		fmt.Fprintf(&all, "%s?%s\n", r.Path, r.Query)
		r.Header.Write(&all)
		all.Write(r.Body)
		if bytes.Contains(all.Bytes(), []byte(egress.PlaceholderPrefix)) {
			t.Errorf("%s %s%s carried a placeholder to the vendor", r.Method, r.Host, r.Path)
		}
	}
	if models == 0 {
		t.Errorf("no model request among:\n%s", RequestList(srv))
	}
}

// checkNoSecret: the credential (and every other secret) is in no file
// of the sandbox (its directory with the transcript, the audit log and
// its disks) nor in the baseline disks, read extent by extent.
func checkNoSecret(t *testing.T, h string, sb *sandbox.Sandbox, secrets ...string) {
	t.Helper()
	for _, dir := range []string{sb.Dir, home.Layout{Root: h}.BaseDisks()} {
		err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				if errors.Is(err, fs.ErrNotExist) {
					return nil
				}
				return err
			}
			if !d.Type().IsRegular() {
				return nil
			}
			found, err := fileContains(path, secrets)
			if err != nil {
				return err
			}
			for _, i := range found {
				t.Errorf("secret %d of %d (%s…) is in %s", i+1, len(secrets), secrets[i][:min(len(secrets[i]), 8)], path)
			}
			return nil
		})
		if err != nil {
			t.Errorf("search %s: %v", dir, err)
		}
	}
}

// fileContains says which of needles are in path's data (their
// indexes), reading only the extents with data (a sparse disk of
// gigabytes holds little).
func fileContains(path string, needles []string) ([]int, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	longest := 0
	for _, n := range needles {
		longest = max(longest, len(n))
	}
	const chunk = 1 << 20
	buf := make([]byte, chunk+longest)
	fd := int(f.Fd())
	found := map[int]bool{}
	for off := int64(0); off < fi.Size() && len(found) < len(needles); {
		data, err := unix.Seek(fd, off, unix.SEEK_DATA)
		if err != nil {
			break // ENXIO: no data after off
		}
		hole, err := unix.Seek(fd, data, unix.SEEK_HOLE)
		if err != nil {
			hole = fi.Size()
		}
		for p := data; p < hole; p += chunk {
			n, err := f.ReadAt(buf[:min(int64(len(buf)), hole-p)], p)
			if err != nil && err != io.EOF {
				return nil, err
			}
			for i, needle := range needles {
				if bytes.Contains(buf[:n], []byte(needle)) {
					found[i] = true
				}
			}
		}
		off = hole
	}
	out := slices.Sorted(maps.Keys(found))
	return out, nil
}

// sandboxOf is the sandbox of airlock --json run's answer.
func sandboxOf(t *testing.T, out string) string {
	t.Helper()
	var res struct {
		Sandbox string `json:"sandbox"`
	}
	if err := json.Unmarshal([]byte(out), &res); err != nil || res.Sandbox == "" {
		t.Fatalf("no sandbox in the answer (%v):\n%s", err, out)
	}
	return res.Sandbox
}

// RequestList is the requests the fake saw, a line each.
func RequestList(srv *fakevendor.Server) string {
	var b strings.Builder
	for _, r := range srv.Requests() {
		fmt.Fprintf(&b, "  %s %s%s?%s → %d (%d bytes)\n", r.Method, r.Host, r.Path, r.Query, r.Status, len(r.Body))
	}
	return b.String()
}

func Abbreviate(s string) string {
	if len(s) > 40 {
		return s[:40] + "…"
	}
	return s
}

func RandomHex(t *testing.T, n int) string {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}

// NetclientProject is a project holding the guest's test HTTP client,
// ./netclient (testenv.NetClient).
func NetclientProject(t *testing.T) string {
	t.Helper()
	project := t.TempDir()
	data, err := os.ReadFile(testenv.NetClient(t, vm.AMD64))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(project, "netclient"), data, 0o755); err != nil {
		t.Fatal(err)
	}
	return project
}
