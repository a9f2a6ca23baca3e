package mcpserver

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// fake is a Service of canned answers that records its calls.
type fake struct {
	calls []string
	files map[string]string
}

func (f *fake) Open(_ context.Context, in OpenInput) (Opened, error) {
	f.calls = append(f.calls, "open "+in.Project)
	if in.Project == "/denied" {
		return Opened{}, errors.New("project /denied: not allowed")
	}
	return Opened{ID: "3f2a", Project: in.Project, Image: "minimal", Files: 2}, nil
}

func (f *fake) Exec(_ context.Context, id, command string, timeout time.Duration) (ExecOutput, error) {
	f.calls = append(f.calls, "exec "+id+" "+command+" "+timeout.String())
	if command == "false" {
		return ExecOutput{ExitCode: 1}, nil
	}
	return ExecOutput{Output: "hi\x1b[31m\n"}, nil
}

func (f *fake) Read(_ context.Context, id, rel string) ([]byte, int64, error) {
	f.calls = append(f.calls, "read "+rel)
	c, ok := f.files[rel]
	if !ok {
		return nil, 0, errors.New("no such file")
	}
	return []byte(c), int64(len(c)), nil
}

func (f *fake) Write(_ context.Context, id, rel string, content []byte) error {
	f.calls = append(f.calls, "write "+rel)
	f.files[rel] = string(content)
	return nil
}

func (f *fake) Diff(context.Context, string) (DiffOutput, error) {
	return DiffOutput{Overview: "added a.txt", Files: []DiffFile{{Path: "a.txt", Status: "added", Added: 1}}, Patch: strings.Repeat("+x\n", MaxPatch)}, nil
}

func (f *fake) Submit(_ context.Context, id, summary string) (SubmitOutput, error) {
	f.calls = append(f.calls, "submit "+id+" "+summary)
	return SubmitOutput{ID: id, Files: 1, Review: "airlock review " + id}, nil
}

func connect(t *testing.T, svc Service) *mcp.ClientSession {
	t.Helper()
	st, ct := mcp.NewInMemoryTransports()
	if _, err := New(svc, "test").Connect(t.Context(), st, nil); err != nil {
		t.Fatal(err)
	}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test"}, nil).Connect(t.Context(), ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

func call(t *testing.T, cs *mcp.ClientSession, name string, args map[string]any) (*mcp.CallToolResult, string) {
	t.Helper()
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
	return res, b.String()
}

// TestToolList has the six tools, no apply among them, and a list that
// costs the agent little context: its JSON under 1,500 tokens, counted
// as one token per 3 bytes (tokenizers give about 4 for English and
// JSON).
func TestToolList(t *testing.T) {
	cs := connect(t, &fake{})
	res, err := cs.ListTools(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tl := range res.Tools {
		names = append(names, tl.Name)
		if strings.Contains(tl.Name, "apply") || strings.Contains(tl.Name, "push") || strings.Contains(tl.Name, "commit") {
			t.Errorf("tool %s: no tool applies, commits or pushes", tl.Name)
		}
		if tl.Description == "" || strings.Contains(tl.Description, "\n") {
			t.Errorf("tool %s: want a one-line description, got %q", tl.Name, tl.Description)
		}
	}
	want := "sandbox_diff sandbox_exec sandbox_open sandbox_read sandbox_submit sandbox_write"
	if got := strings.Join(names, " "); got != want {
		t.Errorf("tools %s, want %s", got, want)
	}
	b, _ := json.Marshal(res.Tools)
	tokens := (len(b) + 2) / 3
	t.Logf("tool list: %d bytes of JSON, at most %d tokens", len(b), tokens)
	if tokens > 1500 {
		t.Errorf("the tool list is %d bytes (%d tokens at 3 bytes each): keep it under 1,500 tokens", len(b), tokens)
	}
}

// TestToolResults: a failing command is a result with its exit code, not
// an error; the service's refusal is a tool error the agent reads; the
// results carry structured content; guest bytes are made safe; bad paths
// never reach the service.
func TestToolResults(t *testing.T) {
	f := &fake{files: map[string]string{"a.txt": "hello\n"}}
	cs := connect(t, f)
	res, txt := call(t, cs, "sandbox_open", map[string]any{"project": "/p"})
	if res.IsError || !strings.Contains(txt, "3f2a") {
		t.Errorf("open: %v %q", res.IsError, txt)
	}
	if m, _ := res.StructuredContent.(map[string]any); m["id"] != "3f2a" {
		t.Errorf("open: structured %#v, want id", res.StructuredContent)
	}
	res, txt = call(t, cs, "sandbox_open", map[string]any{"project": "/denied"})
	if !res.IsError || !strings.Contains(txt, "not allowed") {
		t.Errorf("a refused project: error %v, %q", res.IsError, txt)
	}
	res, txt = call(t, cs, "sandbox_exec", map[string]any{"id": "3f2a", "command": "false"})
	if res.IsError || !strings.Contains(txt, "exit code 1") {
		t.Errorf("exec false: error %v, %q; want a result with exit code 1", res.IsError, txt)
	}
	if m, _ := res.StructuredContent.(map[string]any); m["exit_code"] != float64(1) {
		t.Errorf("exec false: structured %#v", res.StructuredContent)
	}
	_, txt = call(t, cs, "sandbox_exec", map[string]any{"id": "3f2a", "command": "echo hi", "timeout": 5})
	if strings.Contains(txt, "\x1b") || !strings.Contains(txt, `\x1b`) {
		t.Errorf("exec: %q; want the escape shown, not sent", txt)
	}
	if res, _ := call(t, cs, "sandbox_exec", map[string]any{"id": "3f2a", "command": "true", "timeout": 100000}); !res.IsError {
		t.Error("a timeout over the cap was taken")
	}
	_, txt = call(t, cs, "sandbox_read", map[string]any{"id": "3f2a", "path": "./a.txt"})
	if txt != "hello\n" {
		t.Errorf("read: %q", txt)
	}
	for _, p := range []string{"../etc/passwd", "/etc/passwd", "a/../../x", "", ".", "a\nb"} {
		before := len(f.calls)
		for _, tool := range []string{"sandbox_read", "sandbox_write"} {
			args := map[string]any{"id": "3f2a", "path": p}
			if tool == "sandbox_write" {
				args["content"] = "x"
			}
			res, txt := call(t, cs, tool, args)
			if !res.IsError || !strings.Contains(txt, "relative to /workspace") {
				t.Errorf("%s %q: error %v, %q", tool, p, res.IsError, txt)
			}
		}
		if len(f.calls) != before {
			t.Errorf("path %q reached the service: %v", p, f.calls[before:])
		}
	}
	res, txt = call(t, cs, "sandbox_diff", map[string]any{"id": "3f2a"})
	if res.IsError || !strings.Contains(txt, "added a.txt +1 -0") || !strings.Contains(txt, "[patch cut") {
		t.Errorf("diff: %v %.200q", res.IsError, txt)
	}
	if len(txt) > MaxPatch+1000 {
		t.Errorf("diff: %d bytes, want the patch cut to %d", len(txt), MaxPatch)
	}
	if res, _ := call(t, cs, "sandbox_submit", map[string]any{"id": "3f2a", "summary": " "}); !res.IsError {
		t.Error("an empty summary was taken")
	}
	_, txt = call(t, cs, "sandbox_submit", map[string]any{"id": "3f2a", "summary": "did it"})
	if !strings.Contains(txt, "airlock review 3f2a") {
		t.Errorf("submit: %q", txt)
	}
}

func TestCleanPath(t *testing.T) {
	for in, want := range map[string]string{"a.txt": "a.txt", "./a//b/": "a/b", "a/./b": "a/b"} {
		if got, err := CleanPath(in); err != nil || got != want {
			t.Errorf("%q: %q, %v; want %q", in, got, err, want)
		}
	}
	for _, in := range []string{"..", "a/..", "/a", "", "./", "a\x00b", "a\x7fb"} {
		if got, err := CleanPath(in); !errors.Is(err, ErrPath) {
			t.Errorf("%q: %q, %v; want ErrPath", in, got, err)
		}
	}
}
