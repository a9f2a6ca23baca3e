package fakevendor

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"sort"
	"strings"
	"sync/atomic"
)

// OpenAI is the fake of OpenAI's Responses API as Codex CLI uses it, on
// api.openai.com: POST /v1/responses answered as a server-sent event
// stream. Codex first asks to upgrade GET /v1/responses to a WebSocket;
// the fake answers 426 Upgrade Required, on which Codex falls back to
// HTTPS.
//
// The first turn uses the tools the request declares. Codex 0.169.0 in
// its default ("code") mode declares one model-facing tool, the custom
// tool exec, whose JavaScript calls nested tools; the fake then sends a
// script that calls tools.apply_patch (the file) and tools.exec_command
// (the shell command). Without exec it calls apply_patch (a custom or a
// function tool) and the shell tool declared: shell_command, shell or
// exec_command.
type OpenAI struct {
	ids atomic.Int64
}

var _ Vendor = (*OpenAI)(nil)

// Hosts is the API's host.
func (o *OpenAI) Hosts() []string { return []string{"api.openai.com"} }

// Serve answers one request.
func (o *OpenAI) Serve(s *Server, w http.ResponseWriter, r *http.Request, body []byte) int {
	switch {
	case r.URL.Path == "/v1/responses" && r.Header.Get("Upgrade") != "":
		// No WebSocket transport: Codex falls back to HTTPS on 426.
		w.WriteHeader(http.StatusUpgradeRequired)
		return http.StatusUpgradeRequired
	case r.Method == http.MethodPost && r.URL.Path == "/v1/responses":
		return o.respond(s, w, body)
	case r.Method == http.MethodGet && r.URL.Path == "/v1/models":
		// The API's own shape. Codex asks its models endpoint only
		// with a ChatGPT sign-in (not with an API key), and keeps the
		// catalog built into it when the answer is not its own format.
		writeOpenAIJSON(w, http.StatusOK, map[string]any{"object": "list", "data": []any{}})
		return http.StatusOK
	default:
		return openAIError(w, http.StatusNotFound, fmt.Sprintf("fakevendor: no such endpoint %s %s", r.Method, r.URL.Path))
	}
}

// responsesRequest is what the fake reads of a Responses API request.
type responsesRequest struct {
	Model string            `json:"model"`
	Input []json.RawMessage `json:"input"`
	Tools []openAITool      `json:"tools"`
}

type openAITool struct {
	Type  string       `json:"type"`
	Name  string       `json:"name"`
	Tools []openAITool `json:"tools"` // a namespace's
}

type openAIInputItem struct {
	Type  string       `json:"type"`
	Tools []openAITool `json:"tools"` // an additional_tools item's
}

// openAIToolOutputs are the input items that carry a tool's result back.
var openAIToolOutputs = []string{"function_call_output", "custom_tool_call_output", "local_shell_call_output"}

func (o *OpenAI) respond(s *Server, w http.ResponseWriter, body []byte) int {
	if f, ok := s.nextFault(); ok {
		return openAIError(w, f.status, f.body)
	}
	var req responsesRequest
	if err := json.Unmarshal(body, &req); err != nil {
		return openAIError(w, http.StatusBadRequest, "fakevendor: the request is not JSON: "+err.Error())
	}
	tools := map[string]string{} // name → type, namespaces flattened
	declare := func(ts []openAITool) {
		for _, t := range ts {
			if t.Type == "namespace" {
				for _, c := range t.Tools {
					tools[c.Name] = c.Type
				}
				continue
			}
			tools[t.Name] = t.Type
		}
	}
	declare(req.Tools)
	last := ""
	for _, raw := range req.Input {
		var it openAIInputItem
		if json.Unmarshal(raw, &it) != nil {
			continue
		}
		if it.Type == "additional_tools" {
			declare(it.Tools)
		} else {
			last = it.Type
		}
	}
	if slices.Contains(openAIToolOutputs, last) {
		return o.stream(w, req.Model, []map[string]any{o.message(s.Script.Final)})
	}
	items, err := o.toolCalls(s.Script, tools)
	if err != nil {
		return openAIError(w, http.StatusBadRequest, err.Error())
	}
	return o.stream(w, req.Model, items)
}

// toolCalls are the first turn's output items, in the form of the tools
// declared.
func (o *OpenAI) toolCalls(sc Script, tools map[string]string) ([]map[string]any, error) {
	patch := addFilePatch(sc.File, sc.Content)
	if tools["exec"] == "custom" && tools["apply_patch"] == "" {
		js := fmt.Sprintf("await tools.apply_patch(%s);\n"+
			"const run = await tools.exec_command({cmd: %s, yield_time_ms: 30000});\ntext(run.output);\n",
			jsString(patch), jsString(sc.Shell))
		return []map[string]any{o.customCall("exec", js)}, nil
	}
	var items []map[string]any
	switch tools["apply_patch"] {
	case "custom":
		items = append(items, o.customCall("apply_patch", patch))
	case "function":
		items = append(items, o.functionCall("apply_patch", map[string]any{"input": patch}))
	default:
		return nil, fmt.Errorf("fakevendor: the request declares no apply_patch tool nor exec (code mode); it declares %s", openAIToolList(tools))
	}
	switch {
	case tools["shell_command"] == "function":
		items = append(items, o.functionCall("shell_command", map[string]any{"command": sc.Shell}))
	case tools["shell"] == "function":
		items = append(items, o.functionCall("shell", map[string]any{"command": []string{"bash", "-lc", sc.Shell}}))
	case tools["exec_command"] == "function":
		items = append(items, o.functionCall("exec_command", map[string]any{"cmd": sc.Shell}))
	default:
		return nil, fmt.Errorf("fakevendor: the request declares no shell tool (shell_command, shell, exec_command); it declares %s", openAIToolList(tools))
	}
	return items, nil
}

// addFilePatch is apply_patch's grammar for a new file.
func addFilePatch(path, content string) string {
	var b strings.Builder
	b.WriteString("*** Begin Patch\n*** Add File: " + path + "\n")
	for l := range strings.SplitSeq(strings.TrimSuffix(content, "\n"), "\n") {
		b.WriteString("+" + l + "\n")
	}
	b.WriteString("*** End Patch")
	return b.String()
}

// jsString is s as a JavaScript string literal.
func jsString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

func openAIToolList(tools map[string]string) string {
	var out []string
	for n, t := range tools {
		out = append(out, n+" ("+t+")")
	}
	sort.Strings(out)
	if len(out) == 0 {
		return "none"
	}
	return strings.Join(out, ", ")
}

func (o *OpenAI) id(prefix string) string { return fmt.Sprintf("%s_fake%d", prefix, o.ids.Add(1)) }

func (o *OpenAI) customCall(name, input string) map[string]any {
	return map[string]any{"type": "custom_tool_call", "id": o.id("ctc"), "status": "completed", "call_id": o.id("call"), "name": name, "input": input}
}

func (o *OpenAI) functionCall(name string, args any) map[string]any {
	a, _ := json.Marshal(args)
	return map[string]any{"type": "function_call", "id": o.id("fc"), "status": "completed", "call_id": o.id("call"), "name": name, "arguments": string(a)}
}

func (o *OpenAI) message(text string) map[string]any {
	return map[string]any{"type": "message", "id": o.id("msg"), "status": "completed", "role": "assistant",
		"content": []any{map[string]any{"type": "output_text", "text": text, "annotations": []any{}}}}
}

// stream answers items as the Responses API streams them: created, each
// item added, its deltas and done, then completed with the usage.
func (o *OpenAI) stream(w http.ResponseWriter, model string, items []map[string]any) int {
	e := newSSE(w)
	seq := 0
	send := func(typ string, fields map[string]any) {
		fields["type"], fields["sequence_number"] = typ, seq
		seq++
		data, _ := json.Marshal(fields)
		e.event(typ, data)
	}
	resp := map[string]any{"id": o.id("resp"), "object": "response", "model": model, "status": "in_progress", "output": []any{}}
	send("response.created", map[string]any{"response": resp})
	send("response.in_progress", map[string]any{"response": resp})
	for i, it := range items {
		added := cloneOpenAIItem(it)
		added["status"] = "in_progress"
		switch it["type"] {
		case "message":
			added["content"] = []any{}
			send("response.output_item.added", map[string]any{"output_index": i, "item": added})
			text := it["content"].([]any)[0].(map[string]any)["text"].(string)
			part := map[string]any{"type": "output_text", "text": "", "annotations": []any{}}
			send("response.content_part.added", map[string]any{"item_id": it["id"], "output_index": i, "content_index": 0, "part": part})
			for _, d := range openAIChunks(text) {
				send("response.output_text.delta", map[string]any{"item_id": it["id"], "output_index": i, "content_index": 0, "delta": d})
			}
			send("response.output_text.done", map[string]any{"item_id": it["id"], "output_index": i, "content_index": 0, "text": text})
			send("response.content_part.done", map[string]any{"item_id": it["id"], "output_index": i, "content_index": 0, "part": it["content"].([]any)[0]})
		case "function_call":
			added["arguments"] = ""
			send("response.output_item.added", map[string]any{"output_index": i, "item": added})
			args := it["arguments"].(string)
			for _, d := range openAIChunks(args) {
				send("response.function_call_arguments.delta", map[string]any{"item_id": it["id"], "output_index": i, "delta": d})
			}
			send("response.function_call_arguments.done", map[string]any{"item_id": it["id"], "output_index": i, "arguments": args})
		case "custom_tool_call":
			added["input"] = ""
			send("response.output_item.added", map[string]any{"output_index": i, "item": added})
			input := it["input"].(string)
			for _, d := range openAIChunks(input) {
				send("response.custom_tool_call_input.delta", map[string]any{"item_id": it["id"], "output_index": i, "delta": d})
			}
			send("response.custom_tool_call_input.done", map[string]any{"item_id": it["id"], "output_index": i, "input": input})
		}
		send("response.output_item.done", map[string]any{"output_index": i, "item": it})
	}
	done := map[string]any{}
	for k, v := range resp {
		done[k] = v
	}
	done["status"], done["output"] = "completed", items
	done["usage"] = map[string]any{
		"input_tokens": 100, "input_tokens_details": map[string]any{"cached_tokens": 0},
		"output_tokens": 20, "output_tokens_details": map[string]any{"reasoning_tokens": 0},
		"total_tokens": 120,
	}
	send("response.completed", map[string]any{"response": done})
	return http.StatusOK
}

func cloneOpenAIItem(it map[string]any) map[string]any {
	out := make(map[string]any, len(it))
	for k, v := range it {
		out[k] = v
	}
	return out
}

// openAIChunks splits s in a few deltas, as a model streams them.
func openAIChunks(s string) []string {
	const n = 16
	var out []string
	for len(s) > n {
		// Keep UTF-8 sequences whole.
		i := n
		for i < len(s) && s[i]&0xC0 == 0x80 {
			i++
		}
		out = append(out, s[:i])
		s = s[i:]
	}
	return append(out, s)
}

// openAIError answers status with OpenAI's error body.
func openAIError(w http.ResponseWriter, status int, message string) int {
	typ, code := "invalid_request_error", any(nil)
	switch {
	case status == http.StatusUnauthorized:
		code = "invalid_api_key"
	case status == http.StatusNotFound:
		code = "not_found"
	case status == http.StatusTooManyRequests:
		typ, code = "requests", "rate_limit_exceeded"
	case status >= 500:
		typ = "server_error"
	}
	writeOpenAIJSON(w, status, map[string]any{"error": map[string]any{"message": message, "type": typ, "param": nil, "code": code}})
	return status
}

func writeOpenAIJSON(w http.ResponseWriter, status int, v any) {
	data, _ := json.Marshal(v)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	w.Write(data)
}
