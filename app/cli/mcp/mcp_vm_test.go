package mcp

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/airlock-dev/airlock/app/cli/clitest"
	"github.com/airlock-dev/airlock/app/sandbox"
	"github.com/airlock-dev/airlock/testkit/testenv"
)

// server starts airlock mcp on home as its own process (the test binary
// as airlock), with a config.toml that allows the folders in projects,
// and connects the SDK's client to it over stdio.
func server(t *testing.T, home, projects string) *mcp.ClientSession {
	t.Helper()
	cfg := t.TempDir()
	if err := os.MkdirAll(filepath.Join(cfg, "airlock"), 0o700); err != nil {
		t.Fatal(err)
	}
	toml := "[mcp]\nprojects = [" + `"` + projects + `/*"` + "]\n"
	if err := os.WriteFile(filepath.Join(cfg, "airlock", "config.toml"), []byte(toml), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "--home", home, "mcp")
	cmd.Env = append(os.Environ(), clitest.AsAirlockEnv+"=1", "XDG_CONFIG_HOME="+cfg)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "airlock-test"}, nil).Connect(t.Context(), &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatalf("connect to airlock mcp: %v\n%s", err, stderr.String())
	}
	t.Cleanup(func() {
		cs.Close()
		t.Logf("airlock mcp's stderr:\n%s", stderr.String())
	})
	return cs
}

// call calls a tool; a protocol error fails the test, a tool error is
// the result's.
func call(t *testing.T, cs *mcp.ClientSession, name string, args map[string]any) (res *mcp.CallToolResult, text string, structured map[string]any) {
	t.Helper()
	start := time.Now()
	res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("%s: a protocol error: %v", name, err)
	}
	var b strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	structured, _ = res.StructuredContent.(map[string]any)
	t.Logf("%s: %s, error %v, %d bytes", name, time.Since(start).Round(time.Millisecond), res.IsError, b.Len())
	return res, b.String(), structured
}

// TestMCPOutward drives airlock mcp with the SDK's client over stdio
// through the whole outward flow on a real VM: a project outside [mcp]
// projects refused with how to allow it; sandbox_open on an allowed one
// (an ordinary sandbox, its origin in the audit log); sandbox_exec of
// false (exit 1 as a result, not an error); write, read, diff, submit;
// then the test reviews and applies with airlock diff and apply as a
// person would. Attacks: "..", absolute paths and symbolic links in
// sandbox_read and sandbox_write (a link to the guest's / and to a file
// outside /workspace), a 1 GB output (cut, the server's memory bounded
// by the cut), a tool call on a sandbox not opened over MCP, on a
// submitted one and on one whose VM was stopped.
func TestMCPOutward(t *testing.T) {
	testenv.SkipIfShort(t)
	home := testenv.VMHome(t)
	projects := t.TempDir()
	proj := filepath.Join(projects, "app")
	if err := os.MkdirAll(proj, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(proj, "a.txt"), []byte("one\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	outside := t.TempDir()
	cs := server(t, home, projects)

	res, text, _ := call(t, cs, "sandbox_open", map[string]any{"project": outside})
	if !res.IsError || !strings.Contains(text, "[mcp]") {
		t.Fatalf("a project outside [mcp] projects: error %v, %q; want a refusal saying how to allow it", res.IsError, text)
	}
	res, text, st := call(t, cs, "sandbox_open", map[string]any{"project": proj})
	id, _ := st["id"].(string)
	if res.IsError || id == "" {
		t.Fatalf("sandbox_open: %q", text)
	}
	t.Cleanup(func() { clitest.Run(t, home, nil, "stop", "--kill", id) })

	res, text, st = call(t, cs, "sandbox_exec", map[string]any{"id": id, "command": "false"})
	if res.IsError || st["exit_code"] != float64(1) {
		t.Errorf("exec false: error %v, %v, %q; want exit_code 1 as a result", res.IsError, st, text)
	}
	_, text, st = call(t, cs, "sandbox_exec", map[string]any{"id": id, "command": "cat a.txt; pwd; echo two >> a.txt; ln -s / root; ln -s /etc/passwd pw; mkdir d; ln -s /etc d/etc"})
	if st["exit_code"] != float64(0) || !strings.Contains(text, "one\n/workspace") {
		t.Errorf("exec: %v %q", st, text)
	}
	res, text, _ = call(t, cs, "sandbox_write", map[string]any{"id": id, "path": "src/new.go", "content": "package src\n\nfunc New() int { return 1 }\n"})
	if res.IsError {
		t.Errorf("write: %q", text)
	}
	if _, text, _ = call(t, cs, "sandbox_read", map[string]any{"id": id, "path": "a.txt"}); text != "one\ntwo\n" {
		t.Errorf("read a.txt: %q", text)
	}
	for _, c := range []struct{ tool, path, want string }{
		{"sandbox_read", "../etc/passwd", "relative to /workspace"},
		{"sandbox_read", "/etc/passwd", "relative to /workspace"},
		{"sandbox_read", "pw", "symbolic link"},
		{"sandbox_read", "root/etc/passwd", "symbolic link"},
		{"sandbox_read", "d/etc/passwd", "symbolic link"},
		{"sandbox_read", "d", "not a regular file"},
		{"sandbox_write", "pw", "symbolic link"},
		{"sandbox_write", "root/tmp/x", "symbolic link"},
		{"sandbox_write", "d/etc/x", "symbolic link"},
		{"sandbox_write", "../x", "relative to /workspace"},
	} {
		args := map[string]any{"id": id, "path": c.path}
		if c.tool == "sandbox_write" {
			args["content"] = "x"
		}
		if res, text, _ := call(t, cs, c.tool, args); !res.IsError || !strings.Contains(text, c.want) {
			t.Errorf("%s %s: error %v, %q; want a refusal naming %q", c.tool, c.path, res.IsError, text, c.want)
		}
	}
	if _, text, _ := call(t, cs, "sandbox_exec", map[string]any{"id": id, "command": "cat /tmp/x /etc/x 2>&1; true"}); !strings.Contains(text, "No such file") {
		t.Errorf("a refused write left a file: %q", text)
	}

	// Past both caps (the result's 64 KiB, the transcript's 8 MiB) on
	// the smallest output that is: the caps are headtail's, tested there.
	res, text, st = call(t, cs, "sandbox_exec", map[string]any{"id": id, "command": "head -c 9000000 /dev/zero | tr '\\0' a; echo; echo the-end"})
	if res.IsError || st["truncated"] != true || len(text) > 80<<10 || !strings.Contains(text, "the-end") {
		t.Errorf("9 MB of output: error %v, %d bytes back, truncated %v, tail %q", res.IsError, len(text), st["truncated"], text[max(0, len(text)-200):])
	}
	if sb, err := openStore(t, home).Get(id); err != nil {
		t.Fatal(err)
	} else if fi, err := os.Stat(sb.Path(sandbox.TranscriptFile)); err != nil || fi.Size() > 8<<20+4<<10 {
		t.Errorf("transcript after 9 MB of output: %v, %v", fi, err)
	}

	res, text, _ = call(t, cs, "sandbox_diff", map[string]any{"id": id})
	for _, want := range []string{"src/new.go", "a.txt", "+two", "func New"} {
		if !strings.Contains(text, want) {
			t.Errorf("diff: no %q in\n%s", want, text)
		}
	}
	if strings.Contains(text, "passwd") && !strings.Contains(text, "pw") {
		t.Errorf("diff: %s", text)
	}
	res, text, st = call(t, cs, "sandbox_submit", map[string]any{"id": id, "summary": "Added New and a second line."})
	if res.IsError || st["id"] != id {
		t.Fatalf("submit: %q", text)
	}
	if res, text, _ := call(t, cs, "sandbox_exec", map[string]any{"id": id, "command": "true"}); !res.IsError || !strings.Contains(text, "submitted") {
		t.Errorf("exec after submit: error %v, %q", res.IsError, text)
	}

	// The person's review: the sandbox is an ordinary one.
	code, out, errOut := clitest.Run(t, home, nil, "diff", id, "--stat")
	if code != 0 || !strings.Contains(out, "src/new.go") {
		t.Fatalf("airlock diff: exit %d\n%s\n%s", code, out, errOut)
	}
	code, out, errOut = clitest.Run(t, home, nil, "apply", id, "a.txt", "src/new.go")
	if code != 0 {
		t.Fatalf("airlock apply: exit %d\n%s\n%s", code, out, errOut)
	}
	if b, _ := os.ReadFile(filepath.Join(proj, "a.txt")); string(b) != "one\ntwo\n" {
		t.Errorf("a.txt after apply: %q", b)
	}
	if _, err := os.Stat(filepath.Join(proj, "src", "new.go")); err != nil {
		t.Errorf("src/new.go after apply: %v", err)
	}
	checkAudit(t, home, id)

	// A sandbox no MCP client opened; one whose VM stopped.
	theirs, err := openStore(t, home).Create(sandbox.Meta{Project: proj, Command: []string{"true"}})
	if err != nil {
		t.Fatal(err)
	}
	if res, text, _ := call(t, cs, "sandbox_read", map[string]any{"id": theirs.ID, "path": "a.txt"}); !res.IsError || !strings.Contains(text, "not opened over MCP") {
		t.Errorf("a person's sandbox: error %v, %q", res.IsError, text)
	}
	_, _, st = call(t, cs, "sandbox_open", map[string]any{"project": proj})
	second, _ := st["id"].(string)
	if second == "" {
		t.Fatal("second sandbox_open gave no id")
	}
	if code, out, errOut := clitest.Run(t, home, nil, "stop", second); code != 0 {
		t.Fatalf("stop: %d %s %s", code, out, errOut)
	}
	if res, text, _ := call(t, cs, "sandbox_exec", map[string]any{"id": second, "command": "true"}); !res.IsError || !strings.Contains(text, "not running") {
		t.Errorf("exec on a stopped VM: error %v, %q", res.IsError, text)
	}
}

// checkAudit finds the MCP tool calls in the sandbox's audit log.
func checkAudit(t *testing.T, home, id string) {
	t.Helper()
	sb, err := openStore(t, home).Get(id)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := sb.AuditRaw()
	if err != nil {
		t.Fatal(err)
	}
	out := string(raw)
	var seen []string
	for _, line := range strings.Split(out, "\n") {
		var ev struct {
			Event string         `json:"event"`
			Data  map[string]any `json:"data"`
		}
		if json.Unmarshal([]byte(line), &ev) != nil {
			continue
		}
		if o, ok := ev.Data["origin"].(map[string]any); ok {
			seen = append(seen, ev.Event+":"+o["mcp"].(string))
		} else if m, ok := ev.Data["mcp"].(string); ok {
			seen = append(seen, ev.Event+":"+m)
		} else if c, ok := ev.Data["cause"].(string); ok {
			seen = append(seen, ev.Event+":"+c)
		}
	}
	got := strings.Join(seen, " ")
	for _, want := range []string{"created:sandbox_open", "exec:sandbox_exec", "write:sandbox_write", "collected:mcp sandbox_diff", "submitted:sandbox_submit"} {
		if !strings.Contains(got, want) {
			t.Errorf("audit log: no %s in %s\n%s", want, got, out)
		}
	}
}

func openStore(t *testing.T, home string) *sandbox.Store {
	t.Helper()
	store, err := sandbox.Open(home)
	if err != nil {
		t.Fatal(err)
	}
	return store
}
