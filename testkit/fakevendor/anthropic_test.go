package fakevendor

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

var anthropicScript = Script{
	Dir:     "/workspace",
	File:    "notes/hello.txt",
	Content: "Hello.\nA \"quoted\" second line.\n",
	Shell:   "echo ran | tee shell.out",
	Final:   "I wrote notes/hello.txt and ran the check.",
}

// claudeTools is the start of the tool list Claude Code offers.
var claudeTools = []map[string]any{{"name": "Agent"}, {"name": "Bash"}, {"name": "Edit"}, {"name": "Read"}, {"name": "Write"}}

// anthropicClient reaches s under api.anthropic.com, trusting its CA.
func anthropicClient(s *Server) *http.Client { return testClient(s) }

// anthropicPost sends a Messages API request with messages and tools.
func anthropicPost(t *testing.T, c *http.Client, path string, req map[string]any) *http.Response {
	t.Helper()
	return send(t, c, http.MethodPost, "https://api.anthropic.com"+path, http.Header{"x-api-key": {"sk-test"}, "anthropic-version": {"2023-06-01"}}, req)
}

// anthropicUser is a first turn: the user's prompt.
func anthropicUser(text string) []map[string]any {
	return []map[string]any{{"role": "user", "content": []map[string]any{{"type": "text", "text": text}}}}
}

// anthropicToolResults is msgs followed by the assistant's tool calls
// and the user's tool results.
func anthropicToolResults(msgs []map[string]any) []map[string]any {
	return append(msgs,
		map[string]any{"role": "assistant", "content": []map[string]any{
			{"type": "tool_use", "id": "toolu_1", "name": "Write", "input": map[string]any{}},
			{"type": "tool_use", "id": "toolu_2", "name": "Bash", "input": map[string]any{}},
		}},
		map[string]any{"role": "user", "content": []map[string]any{
			{"type": "tool_result", "tool_use_id": "toolu_1", "content": "File created"},
			{"type": "tool_result", "tool_use_id": "toolu_2", "content": "ran"},
		}},
	)
}

// anthropicEvent is one server-sent event.
type anthropicEvent struct {
	Name string
	Data map[string]any
}

// readAnthropicSSE parses a stream strictly: every event has a name and
// one data line of JSON whose type is the event's name, and events end
// with a blank line.
func readAnthropicSSE(t *testing.T, r io.Reader) []anthropicEvent {
	t.Helper()
	var out []anthropicEvent
	var cur anthropicEvent
	var data []string
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "event: "):
			cur.Name = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: "):
			data = append(data, strings.TrimPrefix(line, "data: "))
		case line == "":
			if cur.Name == "" || len(data) != 1 {
				t.Fatalf("malformed event: name %q, data lines %q", cur.Name, data)
			}
			if err := json.Unmarshal([]byte(data[0]), &cur.Data); err != nil {
				t.Fatalf("event %s: data is not JSON: %v", cur.Name, err)
			}
			if cur.Data["type"] != cur.Name {
				t.Errorf("event %s carries type %v", cur.Name, cur.Data["type"])
			}
			out = append(out, cur)
			cur, data = anthropicEvent{}, nil
		default:
			t.Fatalf("unexpected line %q", line)
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if cur.Name != "" || len(data) > 0 {
		t.Fatalf("the stream ends inside an event")
	}
	return out
}

// anthropicAssembled is a streamed message put together as a client does.
type anthropicAssembled struct {
	Names  []string
	Blocks []map[string]any // text blocks' text, tool_use blocks' parsed input
	Stop   string
	Usage  bool
}

func anthropicAssemble(t *testing.T, events []anthropicEvent) anthropicAssembled {
	t.Helper()
	var a anthropicAssembled
	var partial []string
	for _, e := range events {
		a.Names = append(a.Names, e.Name)
		switch e.Name {
		case "message_start":
			m := e.Data["message"].(map[string]any)
			if m["role"] != "assistant" || m["stop_reason"] != nil {
				t.Errorf("message_start: %v", m)
			}
			_, a.Usage = m["usage"].(map[string]any)
		case "content_block_start":
			if int(e.Data["index"].(float64)) != len(a.Blocks) {
				t.Errorf("block %v starts out of order", e.Data["index"])
			}
			a.Blocks = append(a.Blocks, e.Data["content_block"].(map[string]any))
			partial = append(partial, "")
		case "content_block_delta":
			i := int(e.Data["index"].(float64))
			d := e.Data["delta"].(map[string]any)
			switch d["type"] {
			case "text_delta":
				a.Blocks[i]["text"] = a.Blocks[i]["text"].(string) + d["text"].(string)
			case "input_json_delta":
				partial[i] += d["partial_json"].(string)
			default:
				t.Errorf("delta type %v", d["type"])
			}
		case "content_block_stop":
			i := int(e.Data["index"].(float64))
			if a.Blocks[i]["type"] == "tool_use" {
				var in map[string]any
				if err := json.Unmarshal([]byte(partial[i]), &in); err != nil {
					t.Fatalf("block %d: the input's JSON pieces do not make JSON: %v", i, err)
				}
				a.Blocks[i]["input"] = in
			}
		case "message_delta":
			a.Stop = e.Data["delta"].(map[string]any)["stop_reason"].(string)
			if _, ok := e.Data["usage"].(map[string]any)["output_tokens"]; !ok {
				t.Errorf("message_delta without usage.output_tokens")
			}
		}
	}
	return a
}

func TestAnthropicStreamsToolCallsThenFinal(t *testing.T) {
	s := Start(t, anthropicScript, Anthropic{})
	c := anthropicClient(s)
	first := anthropicUser("Write the file and run the check.")

	resp := anthropicPost(t, c, "/v1/messages?beta=true", map[string]any{
		"model": "claude-test", "stream": true, "max_tokens": 1000, "tools": claudeTools, "messages": first,
	})
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("status %d, content type %q", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	a := anthropicAssemble(t, readAnthropicSSE(t, resp.Body))
	wantNames := []string{"message_start", "ping",
		"content_block_start", "content_block_delta", "content_block_delta", "content_block_stop",
		"content_block_start", "content_block_delta", "content_block_delta", "content_block_stop",
		"message_delta", "message_stop"}
	if diff := cmp.Diff(wantNames, a.Names); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
	if a.Stop != "tool_use" || !a.Usage {
		t.Errorf("stop reason %q, usage %v; want tool_use with usage", a.Stop, a.Usage)
	}
	if len(a.Blocks) != 2 {
		t.Fatalf("%d blocks, want 2", len(a.Blocks))
	}
	for _, b := range a.Blocks {
		if b["type"] != "tool_use" || !strings.HasPrefix(b["id"].(string), "toolu_") {
			t.Errorf("block %v: want a tool_use with a toolu_ id", b)
		}
	}
	if diff := cmp.Diff(map[string]any{"file_path": "/workspace/notes/hello.txt", "content": anthropicScript.Content}, a.Blocks[0]["input"]); a.Blocks[0]["name"] != "Write" || diff != "" {
		t.Errorf("first call %v (-want +got input):\n%s", a.Blocks[0]["name"], diff)
	}
	if in := a.Blocks[1]["input"].(map[string]any); a.Blocks[1]["name"] != "Bash" || in["command"] != anthropicScript.Shell {
		t.Errorf("second call %v %v, want Bash with command %q", a.Blocks[1]["name"], in, anthropicScript.Shell)
	}

	resp = anthropicPost(t, c, "/v1/messages?beta=true", map[string]any{
		"model": "claude-test", "stream": true, "max_tokens": 1000, "tools": claudeTools, "messages": anthropicToolResults(first),
	})
	a = anthropicAssemble(t, readAnthropicSSE(t, resp.Body))
	if a.Stop != "end_turn" || len(a.Blocks) != 1 || a.Blocks[0]["type"] != "text" || a.Blocks[0]["text"] != anthropicScript.Final {
		t.Errorf("after the tool results: stop %q, blocks %v; want the final message with end_turn", a.Stop, a.Blocks)
	}

	got := s.Requests()
	if len(got) != 2 || got[0].Path != "/v1/messages" || got[0].Query != "beta=true" || got[0].Status != http.StatusOK ||
		got[0].Header.Get("x-api-key") != "sk-test" || !bytes.Contains(got[1].Body, []byte("tool_result")) {
		t.Errorf("recorded %+v", got)
	}
}

// anthropicMsg is a non-streamed answer.
type anthropicMsg struct {
	Type, Role, Model string
	StopReason        string `json:"stop_reason"`
	Content           []struct {
		Type, Text, Name string
		Input            map[string]any
	}
	Usage struct {
		InputTokens  int `json:"input_tokens"`
		OutputTokens int `json:"output_tokens"`
	}
}

func anthropicDecode[T any](t *testing.T, r io.Reader) T {
	t.Helper()
	var v T
	if err := json.NewDecoder(r).Decode(&v); err != nil {
		t.Fatal(err)
	}
	return v
}

func TestAnthropicJSONMessage(t *testing.T) {
	s := Start(t, anthropicScript, Anthropic{})
	c := anthropicClient(s)
	resp := anthropicPost(t, c, "/v1/messages", map[string]any{"model": "claude-test", "max_tokens": 100, "tools": claudeTools, "messages": anthropicUser("go")})
	m := anthropicDecode[anthropicMsg](t, resp.Body)
	if m.Type != "message" || m.Role != "assistant" || m.Model != "claude-test" || m.StopReason != "tool_use" || m.Usage.OutputTokens == 0 {
		t.Errorf("message %+v", m)
	}
	if len(m.Content) != 2 || m.Content[0].Name != "Write" || m.Content[0].Input["file_path"] != "/workspace/notes/hello.txt" || m.Content[1].Name != "Bash" {
		t.Errorf("content %+v", m.Content)
	}
	resp = anthropicPost(t, c, "/v1/messages", map[string]any{"model": "claude-test", "max_tokens": 100, "tools": claudeTools, "messages": anthropicToolResults(anthropicUser("go"))})
	m = anthropicDecode[anthropicMsg](t, resp.Body)
	if m.StopReason != "end_turn" || len(m.Content) != 1 || m.Content[0].Text != anthropicScript.Final {
		t.Errorf("final %+v", m)
	}
}

// A side request (no tools: the quota check, a title) gets text, never
// the script's tool calls.
func TestAnthropicSideRequest(t *testing.T) {
	s := Start(t, anthropicScript, Anthropic{})
	c := anthropicClient(s)
	resp := anthropicPost(t, c, "/v1/messages", map[string]any{"model": "claude-haiku", "max_tokens": 1, "messages": anthropicUser("quota")})
	m := anthropicDecode[anthropicMsg](t, resp.Body)
	if m.StopReason != "end_turn" || len(m.Content) != 1 || m.Content[0].Type != "text" {
		t.Errorf("side request answered %+v", m)
	}
}

// A CLI whose tools are renamed is told so, not left waiting.
func TestAnthropicMissingTools(t *testing.T) {
	s := Start(t, anthropicScript, Anthropic{})
	resp := anthropicPost(t, anthropicClient(s), "/v1/messages", map[string]any{
		"model": "claude-test", "max_tokens": 100, "tools": []map[string]any{{"name": "WriteFile"}, {"name": "Shell"}}, "messages": anthropicUser("go"),
	})
	e := anthropicDecode[anthropicErr](t, resp.Body)
	if resp.StatusCode != http.StatusBadRequest || e.Type != "error" || e.Error.Type != "invalid_request_error" ||
		!strings.Contains(e.Error.Message, "WriteFile, Shell") {
		t.Errorf("status %d, %+v", resp.StatusCode, e)
	}
}

type anthropicErr struct {
	Type  string
	Error struct{ Type, Message string }
}

func TestAnthropicFail(t *testing.T) {
	s := Start(t, anthropicScript, Anthropic{})
	c := anthropicClient(s)
	s.Fail(http.StatusTooManyRequests, "Number of request tokens has exceeded your rate limit")
	s.Fail(http.StatusInternalServerError, "Internal server error")
	s.Fail(529, "Overloaded")

	// The organization endpoints do not take the model's faults.
	if resp := anthropicGet(t, c, "/api/claude_code/policy_limits"); resp.StatusCode != http.StatusOK {
		t.Errorf("policy_limits: %d", resp.StatusCode)
	}
	for _, want := range []struct {
		status     int
		typ, retry string
	}{
		{429, "rate_limit_error", "1"},
		{500, "api_error", ""},
		{529, "overloaded_error", ""},
	} {
		resp := anthropicPost(t, c, "/v1/messages?beta=true", map[string]any{"model": "m", "stream": true, "tools": claudeTools, "messages": anthropicUser("go")})
		e := anthropicDecode[anthropicErr](t, resp.Body)
		if resp.StatusCode != want.status || e.Type != "error" || e.Error.Type != want.typ || e.Error.Message == "" ||
			resp.Header.Get("retry-after") != want.retry || resp.Header.Get("Content-Type") != "application/json" {
			t.Errorf("fault %d: status %d, retry-after %q, body %+v", want.status, resp.StatusCode, resp.Header.Get("retry-after"), e)
		}
	}
	resp := anthropicPost(t, c, "/v1/messages", map[string]any{"model": "m", "tools": claudeTools, "messages": anthropicUser("go")})
	if m := anthropicDecode[anthropicMsg](t, resp.Body); resp.StatusCode != http.StatusOK || m.StopReason != "tool_use" {
		t.Errorf("after the faults: %d %+v", resp.StatusCode, m)
	}
	var statuses []int
	for _, r := range s.Requests() {
		statuses = append(statuses, r.Status)
	}
	if diff := cmp.Diff([]int{200, 429, 500, 529, 200}, statuses); diff != "" {
		t.Errorf("recorded statuses (-want +got):\n%s", diff)
	}
}

func anthropicGet(t *testing.T, c *http.Client, path string) *http.Response {
	t.Helper()
	return send(t, c, http.MethodGet, "https://api.anthropic.com"+path, nil, nil)
}

// What Claude Code asks besides the model at start.
func TestAnthropicStartEndpoints(t *testing.T) {
	s := Start(t, anthropicScript, Anthropic{})
	c := anthropicClient(s)
	resp := anthropicGet(t, c, "/api/claude_code/policy_limits")
	if v := anthropicDecode[map[string]any](t, resp.Body); resp.StatusCode != http.StatusOK || v["restrictions"] == nil {
		t.Errorf("policy_limits: %d %v", resp.StatusCode, v)
	}
	for _, path := range []string{"/api/claude_code/settings", "/api/claude_cli/bootstrap"} {
		resp := anthropicGet(t, c, path)
		e := anthropicDecode[anthropicErr](t, resp.Body)
		if resp.StatusCode != http.StatusNotFound || e.Error.Type != "not_found_error" || resp.Header.Get("request-id") == "" {
			t.Errorf("%s: %d %+v, request-id %q; want Anthropic's 404 with a request-id", path, resp.StatusCode, e, resp.Header.Get("request-id"))
		}
	}
	resp = anthropicPost(t, c, "/v1/messages/count_tokens?beta=true", map[string]any{"model": "m", "messages": anthropicUser("count me")})
	if v := anthropicDecode[map[string]int](t, resp.Body); resp.StatusCode != http.StatusOK || v["input_tokens"] == 0 {
		t.Errorf("count_tokens: %d %v", resp.StatusCode, v)
	}
}
