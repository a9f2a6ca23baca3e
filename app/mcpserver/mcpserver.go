// Package mcpserver is airlock mcp's Model Context Protocol layer: the
// tools an agent on the host calls to get a sandbox for the risky part
// of its work (sandbox_open, sandbox_exec, sandbox_read, sandbox_write,
// sandbox_diff, sandbox_submit), each described in one line, their
// arguments checked, their results as text and as structured content.
// It builds no run and touches no sandbox itself: a Service (app/cli's,
// over the planner and the executor) does. There is no apply tool, and
// none is to be added: the review gate is the human's.
//
// It must not import app/cli, app/gui, app/pipeline, app/plan, vm or
// fyne.
package mcpserver

import (
	"context"
	"errors"
	"fmt"
	"path"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/airlock-dev/airlock/internal/safetext"
)

// Service does what the tools ask, on ordinary sandboxes.
type Service interface {
	// Open makes a sandbox of project (an absolute folder [mcp] projects
	// allows) whose VM keeps running.
	Open(ctx context.Context, in OpenInput) (Opened, error)
	// Exec runs a shell command line in the sandbox's /workspace.
	Exec(ctx context.Context, id, command string, timeout time.Duration) (ExecOutput, error)
	// Read returns at most MaxRead bytes of a workspace file, and its size.
	Read(ctx context.Context, id, rel string) (content []byte, size int64, err error)
	// Write replaces (or makes) a workspace file.
	Write(ctx context.Context, id, rel string, content []byte) error
	// Diff collects the workspace and returns its changes.
	Diff(ctx context.Context, id string) (DiffOutput, error)
	// Submit collects the workspace, keeps summary as the agent's
	// account, stops the VM and leaves the sandbox to the user's review.
	Submit(ctx context.Context, id, summary string) (SubmitOutput, error)
}

// Caps on what goes back to the agent (every byte of a result costs it
// context) and what it may send.
const (
	MaxOutput  = 64 << 10 // of a command's output, its first and last bytes
	MaxRead    = 256 << 10
	MaxWrite   = 8 << 20
	MaxPatch   = 128 << 10
	MaxSummary = 64 << 10
	// DefaultTimeout and MaxTimeout bound a command of sandbox_exec.
	DefaultTimeout = 10 * time.Minute
	MaxTimeout     = time.Hour
)

// OpenInput is sandbox_open's.
type OpenInput struct {
	Project string `json:"project" jsonschema:"absolute path of the project folder"`
	Image   string `json:"image,omitempty" jsonschema:"guest image (default: the project's environment, else minimal)"`
}

// Opened is sandbox_open's result.
type Opened struct {
	ID      string `json:"id"`
	Project string `json:"project"`
	Image   string `json:"image"`
	Files   int    `json:"files"`
}

type execInput struct {
	ID      string `json:"id"`
	Command string `json:"command" jsonschema:"shell command line, run in /workspace"`
	Timeout int    `json:"timeout,omitempty" jsonschema:"seconds (default 600)"`
}

// ExecOutput is sandbox_exec's result: stdout and stderr as they came,
// cut to MaxOutput.
type ExecOutput struct {
	ExitCode  int    `json:"exit_code"`
	Output    string `json:"output"`
	Truncated bool   `json:"truncated,omitempty"`
	TimedOut  bool   `json:"timed_out,omitempty"`
}

type pathInput struct {
	ID   string `json:"id"`
	Path string `json:"path" jsonschema:"path relative to /workspace"`
}

type readOutput struct {
	Path      string `json:"path"`
	Size      int64  `json:"size"`
	Content   string `json:"content"`
	Truncated bool   `json:"truncated,omitempty"`
	Binary    bool   `json:"binary,omitempty"`
}

type writeInput struct {
	ID      string `json:"id"`
	Path    string `json:"path" jsonschema:"path relative to /workspace"`
	Content string `json:"content"`
}

type writeOutput struct {
	Path  string `json:"path"`
	Bytes int    `json:"bytes"`
}

type idInput struct {
	ID string `json:"id"`
}

// DiffFile is one changed file of DiffOutput.
type DiffFile struct {
	Path    string   `json:"path"`
	Status  string   `json:"status"`
	Added   int      `json:"added"`
	Removed int      `json:"removed"`
	Flags   []string `json:"flags,omitempty"`
}

// DiffOutput is sandbox_diff's result.
type DiffOutput struct {
	Overview  string     `json:"overview"`
	Files     []DiffFile `json:"files"`
	Patch     string     `json:"patch"`
	Truncated bool       `json:"truncated,omitempty"`
}

type submitInput struct {
	ID      string `json:"id"`
	Summary string `json:"summary" jsonschema:"what you changed and why, for the reviewer"`
}

// SubmitOutput is sandbox_submit's result.
type SubmitOutput struct {
	ID    string `json:"id"`
	Files int    `json:"files"`
	// Review is what the user runs to review it.
	Review string `json:"review"`
}

// Tool names and their one-line descriptions: the whole list is sent to
// the agent on every turn, so each stays short.
var descriptions = map[string]string{
	"sandbox_open":   "Open a VM sandbox on a copy of a project; returns its id. Nothing reaches the real project until the user approves it.",
	"sandbox_exec":   "Run a shell command in the sandbox's /workspace (no network); returns exit_code and output.",
	"sandbox_read":   "Read a file of the sandbox's /workspace.",
	"sandbox_write":  "Write a file of the sandbox's /workspace.",
	"sandbox_diff":   "Show the sandbox's changes against the project: what they mean, flags, then the patch.",
	"sandbox_submit": "Hand the sandbox's changes to the user for review (the VM stops). You cannot apply them: the user does.",
}

// New is the server with the tools, over svc.
func New(svc Service, version string) *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: "airlock", Version: version}, nil)
	tool := func(name string) *mcp.Tool { return &mcp.Tool{Name: name, Description: descriptions[name]} }
	mcp.AddTool(s, tool("sandbox_open"), func(ctx context.Context, _ *mcp.CallToolRequest, in OpenInput) (*mcp.CallToolResult, Opened, error) {
		o, err := svc.Open(ctx, in)
		if err != nil {
			return nil, o, err
		}
		return text(fmt.Sprintf("sandbox %s is open on a copy of %s (%d files, image %s): sandbox_exec, sandbox_read and sandbox_write work in it; sandbox_submit hands it to the user.",
			o.ID, o.Project, o.Files, o.Image)), o, nil
	})
	mcp.AddTool(s, tool("sandbox_exec"), func(ctx context.Context, _ *mcp.CallToolRequest, in execInput) (*mcp.CallToolResult, ExecOutput, error) {
		timeout, err := timeoutOf(in.Timeout)
		if err != nil {
			return nil, ExecOutput{}, err
		}
		if strings.TrimSpace(in.Command) == "" || strings.ContainsRune(in.Command, 0) {
			return nil, ExecOutput{}, errors.New("command: give a shell command line")
		}
		out, err := svc.Exec(ctx, in.ID, in.Command, timeout)
		if err != nil {
			return nil, out, err
		}
		out.Output = safetext.Text(out.Output)
		return text(execText(out)), out, nil
	})
	mcp.AddTool(s, tool("sandbox_read"), func(ctx context.Context, _ *mcp.CallToolRequest, in pathInput) (*mcp.CallToolResult, readOutput, error) {
		rel, err := CleanPath(in.Path)
		if err != nil {
			return nil, readOutput{}, err
		}
		b, size, err := svc.Read(ctx, in.ID, rel)
		if err != nil {
			return nil, readOutput{}, err
		}
		out := readOutput{Path: rel, Size: size, Truncated: size > int64(len(b))}
		if out.Truncated {
			b = trimPartialRune(b)
		}
		if !utf8.Valid(b) || strings.ContainsRune(string(b), 0) {
			out.Binary = true
			return text(fmt.Sprintf("%s is a binary file of %d bytes", rel, size)), out, nil
		}
		out.Content = safetext.Text(string(b))
		msg := out.Content
		if out.Truncated {
			msg += fmt.Sprintf("\n[the first %d of %d bytes]", len(b), size)
		}
		return text(msg), out, nil
	})
	mcp.AddTool(s, tool("sandbox_write"), func(ctx context.Context, _ *mcp.CallToolRequest, in writeInput) (*mcp.CallToolResult, writeOutput, error) {
		rel, err := CleanPath(in.Path)
		if err != nil {
			return nil, writeOutput{}, err
		}
		if len(in.Content) > MaxWrite {
			return nil, writeOutput{}, fmt.Errorf("content: %d bytes, at most %d (write a large file with a command in the sandbox)", len(in.Content), MaxWrite)
		}
		if err := svc.Write(ctx, in.ID, rel, []byte(in.Content)); err != nil {
			return nil, writeOutput{}, err
		}
		out := writeOutput{Path: rel, Bytes: len(in.Content)}
		return text(fmt.Sprintf("wrote %d bytes to %s", out.Bytes, rel)), out, nil
	})
	mcp.AddTool(s, tool("sandbox_diff"), func(ctx context.Context, _ *mcp.CallToolRequest, in idInput) (*mcp.CallToolResult, DiffOutput, error) {
		d, err := svc.Diff(ctx, in.ID)
		if err != nil {
			return nil, d, err
		}
		d.Patch, d.Truncated = cut(safetext.Text(d.Patch), MaxPatch, d.Truncated)
		return text(diffText(d)), d, nil
	})
	mcp.AddTool(s, tool("sandbox_submit"), func(ctx context.Context, _ *mcp.CallToolRequest, in submitInput) (*mcp.CallToolResult, SubmitOutput, error) {
		if strings.TrimSpace(in.Summary) == "" {
			return nil, SubmitOutput{}, errors.New("summary: say what you changed and why; the reviewer reads it first")
		}
		if len(in.Summary) > MaxSummary {
			return nil, SubmitOutput{}, fmt.Errorf("summary: %d bytes, at most %d", len(in.Summary), MaxSummary)
		}
		out, err := svc.Submit(ctx, in.ID, in.Summary)
		if err != nil {
			return nil, out, err
		}
		return text(fmt.Sprintf("sandbox %s (%d files changed) waits for the user's review (%s); the user decides what reaches the project.", out.ID, out.Files, out.Review)), out, nil
	})
	return s
}

func text(s string) *mcp.CallToolResult {
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: s}}}
}

func timeoutOf(seconds int) (time.Duration, error) {
	switch {
	case seconds < 0:
		return 0, errors.New("timeout: give seconds, 1 or more")
	case seconds == 0:
		return DefaultTimeout, nil
	case time.Duration(seconds)*time.Second > MaxTimeout:
		return 0, fmt.Errorf("timeout: at most %d seconds", int(MaxTimeout/time.Second))
	}
	return time.Duration(seconds) * time.Second, nil
}

func execText(o ExecOutput) string {
	var b strings.Builder
	b.WriteString(o.Output)
	if o.Output != "" && !strings.HasSuffix(o.Output, "\n") {
		b.WriteByte('\n')
	}
	if o.Truncated {
		b.WriteString("[output cut: its first and last bytes are above]\n")
	}
	if o.TimedOut {
		b.WriteString("[the command ran out of time and was ended]\n")
	}
	fmt.Fprintf(&b, "exit code %d", o.ExitCode)
	return b.String()
}

func diffText(d DiffOutput) string {
	if len(d.Files) == 0 {
		return "no changes"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s\n", d.Overview)
	for _, f := range d.Files {
		fmt.Fprintf(&b, "%s %s +%d -%d", f.Status, f.Path, f.Added, f.Removed)
		if len(f.Flags) > 0 {
			fmt.Fprintf(&b, " (%s)", strings.Join(f.Flags, "; "))
		}
		b.WriteByte('\n')
	}
	b.WriteString("\n")
	b.WriteString(d.Patch)
	if d.Truncated {
		b.WriteString("\n[patch cut; sandbox_read shows any file whole]")
	}
	return b.String()
}

// cut keeps the first max bytes of s, on a rune boundary.
func cut(s string, max int, already bool) (string, bool) {
	if len(s) <= max {
		return s, already
	}
	return string(trimPartialRune([]byte(s[:max]))), true
}

// trimPartialRune drops a rune cut in half at the end of b.
func trimPartialRune(b []byte) []byte {
	for i := 0; i < utf8.UTFMax && len(b) > 0; i++ {
		if r, n := utf8.DecodeLastRune(b); r != utf8.RuneError || n > 1 {
			return b
		}
		b = b[:len(b)-1]
	}
	return b
}

// ErrPath means a path of a tool call is not one inside /workspace.
var ErrPath = errors.New("want a path relative to /workspace")

// CleanPath checks a path an agent gave for a workspace file: relative,
// no "..", no empty or "." elements after cleaning, no NUL or control
// characters; it returns it cleaned. The guest's side refuses links
// (Service).
func CleanPath(p string) (string, error) {
	if p == "" || strings.HasPrefix(p, "/") || strings.ContainsFunc(p, func(r rune) bool { return r < 0x20 || r == 0x7f }) {
		return "", fmt.Errorf("path %q: %w", safetext.Line(p), ErrPath)
	}
	for _, e := range strings.Split(p, "/") {
		if e == ".." {
			return "", fmt.Errorf("path %q: %w (no \"..\")", p, ErrPath)
		}
	}
	c := path.Clean(p)
	if c == "." || len(c) > 4096 {
		return "", fmt.Errorf("path %q: %w", p, ErrPath)
	}
	return c, nil
}
