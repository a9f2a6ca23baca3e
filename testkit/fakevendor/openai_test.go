package fakevendor

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
)

var openAIScript = Script{
	Dir:     "/workspace",
	File:    "notes/hello.txt",
	Content: "Hello.\nA second line.\n",
	Shell:   "echo airlock-shell-$((6*7)) | tee shell.out",
	Final:   "Done: the final message.",
}

// openAIClient reaches srv under api.openai.com, trusting its CA.
func openAIClient(srv *Server) *http.Client { return testClient(srv) }

type sseEvent struct {
	name string
	data map[string]any
}

// postResponses sends body to /v1/responses as Codex does and returns
// the response with the events of its stream.
func postResponses(t *testing.T, srv *Server, body any) (*http.Response, []sseEvent, []byte) {
	t.Helper()
	resp := send(t, openAIClient(srv), http.MethodPost, "https://api.openai.com/v1/responses", http.Header{"Authorization": {"Bearer sk-test"}, "Accept": {"text/event-stream"}}, body)
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		return resp, nil, raw
	}
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Errorf("Content-Type %q, want text/event-stream", ct)
	}
	return resp, parseSSE(t, raw), raw
}

// parseSSE parses a stream strictly: every event has a name and one
// JSON data line whose type is the name, and sequence numbers count up.
func parseSSE(t *testing.T, raw []byte) []sseEvent {
	t.Helper()
	var events []sseEvent
	var name string
	var data []string
	sc := bufio.NewScanner(bytes.NewReader(raw))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "event: "):
			name = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: "):
			data = append(data, strings.TrimPrefix(line, "data: "))
		case line == "":
			if len(data) != 1 {
				t.Fatalf("event %q has %d data lines", name, len(data))
			}
			var m map[string]any
			if err := json.Unmarshal([]byte(data[0]), &m); err != nil {
				t.Fatalf("event %q: %v", name, err)
			}
			if m["type"] != name {
				t.Errorf("event %q carries type %v", name, m["type"])
			}
			if seq := m["sequence_number"]; seq != float64(len(events)) {
				t.Errorf("event %d (%s) has sequence_number %v", len(events), name, seq)
			}
			events = append(events, sseEvent{name, m})
			name, data = "", nil
		default:
			t.Fatalf("unexpected line %q", line)
		}
	}
	if name != "" || data != nil {
		t.Fatal("the stream ends inside an event")
	}
	if len(events) < 2 || events[0].name != "response.created" || events[len(events)-1].name != "response.completed" {
		t.Fatalf("the stream does not go from response.created to response.completed: %v", eventNames(events))
	}
	usage, _ := events[len(events)-1].data["response"].(map[string]any)["usage"].(map[string]any)
	if usage["input_tokens"] == nil || usage["output_tokens"] == nil || usage["total_tokens"] == nil {
		t.Errorf("response.completed has no usage: %v", events[len(events)-1].data)
	}
	return events
}

func eventNames(events []sseEvent) []string {
	var out []string
	for _, e := range events {
		out = append(out, e.name)
	}
	return out
}

// outputItems are the items of the stream's output_item.done events,
// checked against their deltas.
func outputItems(t *testing.T, events []sseEvent) []map[string]any {
	t.Helper()
	deltas := map[string]string{} // item id → concatenated deltas
	var items []map[string]any
	for _, e := range events {
		switch e.name {
		case "response.output_text.delta", "response.function_call_arguments.delta", "response.custom_tool_call_input.delta":
			deltas[e.data["item_id"].(string)] += e.data["delta"].(string)
		case "response.output_item.done":
			items = append(items, e.data["item"].(map[string]any))
		}
	}
	for _, it := range items {
		var whole string
		switch it["type"] {
		case "message":
			whole = it["content"].([]any)[0].(map[string]any)["text"].(string)
		case "function_call":
			whole = it["arguments"].(string)
		case "custom_tool_call":
			whole = it["input"].(string)
		}
		if got := deltas[it["id"].(string)]; got != whole {
			t.Errorf("item %v: the deltas make %q, the item holds %q", it["id"], got, whole)
		}
	}
	return items
}

func userTurn(extra ...map[string]any) []any {
	in := []any{map[string]any{"type": "message", "role": "user", "content": []any{map[string]any{"type": "input_text", "text": "Write the file."}}}}
	for _, e := range extra {
		in = append(in, e)
	}
	return in
}

const wantPatch = "*** Begin Patch\n*** Add File: notes/hello.txt\n+Hello.\n+A second line.\n*** End Patch"

func TestOpenAICodeMode(t *testing.T) {
	srv := Start(t, openAIScript, &OpenAI{})
	// Codex 0.169.0's request: the tools in an additional_tools item,
	// the model-facing one the custom tool exec in namespace functions.
	codeMode := map[string]any{"type": "additional_tools", "role": "developer", "tools": []any{
		map[string]any{"type": "namespace", "name": "functions", "tools": []any{
			map[string]any{"type": "custom", "name": "exec"},
			map[string]any{"type": "function", "name": "wait"},
		}},
	}}
	_, events, _ := postResponses(t, srv, map[string]any{"model": "gpt-6.1-sol", "stream": true, "input": append([]any{codeMode}, userTurn()...)})
	items := outputItems(t, events)
	if len(items) != 1 || items[0]["type"] != "custom_tool_call" || items[0]["name"] != "exec" || items[0]["call_id"] == "" {
		t.Fatalf("first turn: %v", items)
	}
	js := items[0]["input"].(string)
	for _, want := range []string{"tools.apply_patch(" + jsString(wantPatch) + ")", "tools.exec_command({cmd: " + jsString(openAIScript.Shell), "text(run.output)"} {
		if !strings.Contains(js, want) {
			t.Errorf("exec's script lacks %s:\n%s", want, js)
		}
	}

	// The turn with exec's output gets the final message.
	in := append([]any{codeMode}, userTurn(items[0], map[string]any{"type": "custom_tool_call_output", "call_id": items[0]["call_id"], "output": "airlock-shell-42\n"})...)
	_, events, _ = postResponses(t, srv, map[string]any{"model": "gpt-6.1-sol", "stream": true, "input": in})
	items = outputItems(t, events)
	if len(items) != 1 || items[0]["type"] != "message" || items[0]["role"] != "assistant" {
		t.Fatalf("second turn: %v", items)
	}
	if got := items[0]["content"].([]any)[0].(map[string]any)["text"]; got != openAIScript.Final {
		t.Errorf("final message %q, want %q", got, openAIScript.Final)
	}

	reqs := srv.Requests()
	if len(reqs) != 2 || reqs[0].Host != "api.openai.com" || reqs[0].Path != "/v1/responses" || reqs[0].Header.Get("Authorization") != "Bearer sk-test" || reqs[1].Status != http.StatusOK {
		t.Errorf("requests recorded: %+v", reqs)
	}
}

func TestOpenAIFlatTools(t *testing.T) {
	tests := []struct {
		name  string
		tools []any
		want  [][2]string // type, name of each item
		check func(t *testing.T, items []map[string]any)
	}{
		{
			name:  "custom apply_patch and exec_command",
			tools: []any{map[string]any{"type": "custom", "name": "apply_patch"}, map[string]any{"type": "function", "name": "exec_command"}},
			want:  [][2]string{{"custom_tool_call", "apply_patch"}, {"function_call", "exec_command"}},
			check: func(t *testing.T, items []map[string]any) {
				if items[0]["input"] != wantPatch {
					t.Errorf("patch %q", items[0]["input"])
				}
				if args := decodeArgs(t, items[1]); args["cmd"] != openAIScript.Shell {
					t.Errorf("exec_command arguments %v", args)
				}
			},
		},
		{
			name:  "function apply_patch and shell_command",
			tools: []any{map[string]any{"type": "function", "name": "apply_patch"}, map[string]any{"type": "function", "name": "shell_command"}},
			want:  [][2]string{{"function_call", "apply_patch"}, {"function_call", "shell_command"}},
			check: func(t *testing.T, items []map[string]any) {
				if args := decodeArgs(t, items[0]); args["input"] != wantPatch {
					t.Errorf("apply_patch arguments %v", args)
				}
				if args := decodeArgs(t, items[1]); args["command"] != openAIScript.Shell {
					t.Errorf("shell_command arguments %v", args)
				}
			},
		},
		{
			name:  "shell with an argv",
			tools: []any{map[string]any{"type": "custom", "name": "apply_patch"}, map[string]any{"type": "function", "name": "shell"}},
			want:  [][2]string{{"custom_tool_call", "apply_patch"}, {"function_call", "shell"}},
			check: func(t *testing.T, items []map[string]any) {
				cmd, _ := decodeArgs(t, items[1])["command"].([]any)
				if len(cmd) != 3 || cmd[0] != "bash" || cmd[1] != "-lc" || cmd[2] != openAIScript.Shell {
					t.Errorf("shell command %v", cmd)
				}
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := Start(t, openAIScript, &OpenAI{})
			_, events, _ := postResponses(t, srv, map[string]any{"model": "gpt-5.5", "stream": true, "tools": tt.tools, "input": userTurn()})
			items := outputItems(t, events)
			if len(items) != len(tt.want) {
				t.Fatalf("items %v, want %v", items, tt.want)
			}
			for i, w := range tt.want {
				if items[i]["type"] != w[0] || items[i]["name"] != w[1] {
					t.Errorf("item %d is %v %v, want %s %s", i, items[i]["type"], items[i]["name"], w[0], w[1])
				}
			}
			tt.check(t, items)

			outputs := userTurn(items[0], map[string]any{"type": "custom_tool_call_output", "call_id": items[0]["call_id"], "output": "ok"},
				items[1], map[string]any{"type": "function_call_output", "call_id": items[1]["call_id"], "output": "airlock-shell-42"})
			_, events, _ = postResponses(t, srv, map[string]any{"model": "gpt-5.5", "stream": true, "tools": tt.tools, "input": outputs})
			if items := outputItems(t, events); len(items) != 1 || items[0]["type"] != "message" {
				t.Errorf("the turn after the tools' outputs: %v", items)
			}
		})
	}
}

func decodeArgs(t *testing.T, item map[string]any) map[string]any {
	t.Helper()
	var args map[string]any
	if err := json.Unmarshal([]byte(item["arguments"].(string)), &args); err != nil {
		t.Fatalf("%v's arguments: %v", item["name"], err)
	}
	return args
}

func TestOpenAIErrors(t *testing.T) {
	srv := Start(t, openAIScript, &OpenAI{})
	srv.Fail(http.StatusTooManyRequests, "Rate limit reached for requests")
	srv.Fail(http.StatusInternalServerError, "The server had an error")
	srv.Fail(http.StatusUnauthorized, "Incorrect API key provided")
	flat := map[string]any{"model": "gpt-5.5", "stream": true, "input": userTurn(),
		"tools": []any{map[string]any{"type": "custom", "name": "apply_patch"}, map[string]any{"type": "function", "name": "shell_command"}}}
	for _, want := range []struct {
		status   int
		typ, msg string
		code     any
	}{
		{http.StatusTooManyRequests, "requests", "Rate limit reached for requests", "rate_limit_exceeded"},
		{http.StatusInternalServerError, "server_error", "The server had an error", nil},
		{http.StatusUnauthorized, "invalid_request_error", "Incorrect API key provided", "invalid_api_key"},
	} {
		resp, _, raw := postResponses(t, srv, flat)
		var body struct {
			Error struct {
				Message, Type string
				Code          any
			}
		}
		if err := json.Unmarshal(raw, &body); err != nil {
			t.Fatalf("error body %q: %v", raw, err)
		}
		if resp.StatusCode != want.status || body.Error.Message != want.msg || body.Error.Type != want.typ || body.Error.Code != want.code {
			t.Errorf("got %d %+v, want %d %s %s %v", resp.StatusCode, body.Error, want.status, want.typ, want.msg, want.code)
		}
		if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
			t.Errorf("error Content-Type %q", ct)
		}
	}
	// The faults are used up: the script plays again.
	if resp, _, raw := postResponses(t, srv, flat); resp.StatusCode != http.StatusOK {
		t.Errorf("after the faults: %d %s", resp.StatusCode, raw)
	}

	// A request without a tool the script can use says what it declared.
	resp, _, raw := postResponses(t, srv, map[string]any{"model": "m", "stream": true, "input": userTurn(), "tools": []any{map[string]any{"type": "function", "name": "view_image"}}})
	if resp.StatusCode != http.StatusBadRequest || !bytes.Contains(raw, []byte("view_image (function)")) {
		t.Errorf("no usable tool: %d %s", resp.StatusCode, raw)
	}
}

func TestOpenAIWebSocketRefused(t *testing.T) {
	srv := Start(t, openAIScript, &OpenAI{})
	checkWebSocketRefused(t, srv, "https://api.openai.com/v1/responses")
}
