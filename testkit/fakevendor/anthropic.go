package fakevendor

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
)

// Anthropic fakes Anthropic's Messages API as Claude Code uses it, on
// api.anthropic.com: POST /v1/messages (streamed or not, ?beta=true or
// not), its count_tokens, and the two organization endpoints Claude Code
// 2.1 asks at start with either credential (an API key in x-api-key or a
// subscription's token as Authorization: Bearer):
// GET /api/claude_code/policy_limits (no restrictions) and
// GET /api/claude_code/settings (none configured). Anything else, such as
// the bootstrap, event logging and MCP directory requests Claude Code
// makes when CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC is unset, is
// answered 404 (and recorded); the CLI carries on without them.
//
// A model request offering Claude Code's own tools (Write and Bash) plays
// the script: while the last user message carries no tool results, one
// assistant turn with two tool_use blocks, Write (Script.Dir/Script.File,
// Script.Content) and Bash (Script.Shell); once it does, Script.Final
// with stop reason end_turn. A request offering no tools is one of the
// CLI's side requests (the quota check, a title or a topic) and gets a
// short text. A request offering tools but not those two is answered 400,
// so a CLI that renamed its tools fails with a message saying so.
type Anthropic struct{}

var _ Vendor = Anthropic{}

// Claude Code's tools the script calls, as named in its tool list.
const (
	claudeWriteTool = "Write"
	claudeShellTool = "Bash"
)

// Hosts is the API's host.
func (Anthropic) Hosts() []string { return []string{"api.anthropic.com"} }

// Serve answers one request.
func (a Anthropic) Serve(s *Server, w http.ResponseWriter, r *http.Request, body []byte) int {
	w.Header().Set("request-id", "req_"+anthropicID())
	switch {
	case r.Method == http.MethodPost && r.URL.Path == "/v1/messages":
		return a.messages(s, w, body)
	case r.Method == http.MethodPost && r.URL.Path == "/v1/messages/count_tokens":
		return anthropicJSON(w, http.StatusOK, map[string]any{"input_tokens": len(body) / 4})
	case r.Method == http.MethodGet && r.URL.Path == "/api/claude_code/policy_limits":
		// The organization's restrictions: none.
		return anthropicJSON(w, http.StatusOK, map[string]any{"restrictions": map[string]any{}})
	case r.Method == http.MethodGet && r.URL.Path == "/api/claude_code/settings":
		// Managed settings: a 404 carrying a request-id is "none
		// configured" to the CLI (without one it blames an intermediary).
		return anthropicError(w, http.StatusNotFound, "not_found_error", "no managed settings")
	default:
		return anthropicError(w, http.StatusNotFound, "not_found_error",
			fmt.Sprintf("fakevendor: no fake for %s %s", r.Method, r.URL.Path))
	}
}

// anthropicRequest is the part of a Messages API request the fake reads.
type anthropicRequest struct {
	Model    string `json:"model"`
	Stream   bool   `json:"stream"`
	Messages []struct {
		Role    string          `json:"role"`
		Content json.RawMessage `json:"content"`
	} `json:"messages"`
	Tools []struct {
		Name string `json:"name"`
	} `json:"tools"`
}

// anthropicBlock is one content block of an answer.
type anthropicBlock struct {
	Type  string         `json:"type"`
	Text  string         `json:"text,omitempty"`
	ID    string         `json:"id,omitempty"`
	Name  string         `json:"name,omitempty"`
	Input map[string]any `json:"input,omitempty"`
}

func (a Anthropic) messages(s *Server, w http.ResponseWriter, body []byte) int {
	var req anthropicRequest
	if err := json.Unmarshal(body, &req); err != nil {
		return anthropicError(w, http.StatusBadRequest, "invalid_request_error", "fakevendor: the request body is not JSON: "+err.Error())
	}
	if f, ok := s.nextFault(); ok {
		if f.status == http.StatusTooManyRequests {
			w.Header().Set("retry-after", "1")
		}
		return anthropicError(w, f.status, anthropicErrorType(f.status), f.body)
	}
	var names []string
	for _, t := range req.Tools {
		names = append(names, t.Name)
	}
	var blocks []anthropicBlock
	stop := "end_turn"
	switch {
	case len(names) == 0:
		// A side request: the quota check, a title, a topic.
		blocks = []anthropicBlock{{Type: "text", Text: "Scripted task"}}
	case !slices.Contains(names, claudeWriteTool) || !slices.Contains(names, claudeShellTool):
		return anthropicError(w, http.StatusBadRequest, "invalid_request_error", fmt.Sprintf(
			"fakevendor: the request offers no %s and %s tools (it offers %s); the fake's script needs Claude Code's file-writing and shell tools",
			claudeWriteTool, claudeShellTool, strings.Join(names, ", ")))
	case lastUserHasToolResult(req):
		blocks = []anthropicBlock{{Type: "text", Text: s.Script.Final}}
	default:
		stop = "tool_use"
		file := s.Script.File
		if s.Script.Dir != "" {
			file = strings.TrimSuffix(s.Script.Dir, "/") + "/" + file
		}
		blocks = []anthropicBlock{
			{Type: "tool_use", ID: "toolu_" + anthropicID(), Name: claudeWriteTool,
				Input: map[string]any{"file_path": file, "content": s.Script.Content}},
			{Type: "tool_use", ID: "toolu_" + anthropicID(), Name: claudeShellTool,
				Input: map[string]any{"command": s.Script.Shell, "description": "Run the task's command"}},
		}
	}
	msg := anthropicMessage{ID: "msg_" + anthropicID(), Model: req.Model, Blocks: blocks, Stop: stop,
		InputTokens: len(body) / 4, OutputTokens: 16}
	if req.Stream {
		msg.stream(newSSE(w))
		return http.StatusOK
	}
	return anthropicJSON(w, http.StatusOK, msg.json())
}

// lastUserHasToolResult reports whether the conversation's last user
// message carries tool_result blocks: the tools ran, the final answer is
// due.
func lastUserHasToolResult(req anthropicRequest) bool {
	for i := len(req.Messages) - 1; i >= 0; i-- {
		m := req.Messages[i]
		if m.Role != "user" {
			continue
		}
		var blocks []struct {
			Type string `json:"type"`
		}
		if json.Unmarshal(m.Content, &blocks) != nil {
			return false // a plain string
		}
		for _, b := range blocks {
			if b.Type == "tool_result" {
				return true
			}
		}
		return false
	}
	return false
}

// anthropicMessage is one assistant answer.
type anthropicMessage struct {
	ID, Model                 string
	Blocks                    []anthropicBlock
	Stop                      string
	InputTokens, OutputTokens int
}

func (m anthropicMessage) usage(output int) map[string]any {
	return map[string]any{
		"input_tokens": m.InputTokens, "output_tokens": output,
		"cache_creation_input_tokens": 0, "cache_read_input_tokens": 0,
	}
}

func (m anthropicMessage) json() map[string]any {
	return map[string]any{
		"id": m.ID, "type": "message", "role": "assistant", "model": m.Model,
		"content": m.Blocks, "stop_reason": m.Stop, "stop_sequence": nil,
		"usage": m.usage(m.OutputTokens),
	}
}

// stream writes m as the Messages API's server-sent events: text arrives
// as text_delta, a tool's input as input_json_delta in two pieces.
func (m anthropicMessage) stream(e *sse) {
	send := func(name string, v map[string]any) {
		v["type"] = name
		b, _ := json.Marshal(v)
		e.event(name, b)
	}
	start := m.json()
	start["content"] = []any{}
	start["stop_reason"] = nil
	start["usage"] = m.usage(1)
	send("message_start", map[string]any{"message": start})
	send("ping", map[string]any{})
	for i, b := range m.Blocks {
		var first map[string]any
		var deltas []map[string]any
		switch b.Type {
		case "tool_use":
			first = map[string]any{"type": "tool_use", "id": b.ID, "name": b.Name, "input": map[string]any{}}
			in, _ := json.Marshal(b.Input)
			half := len(in) / 2
			for _, part := range []string{string(in[:half]), string(in[half:])} {
				deltas = append(deltas, map[string]any{"type": "input_json_delta", "partial_json": part})
			}
		default:
			first = map[string]any{"type": "text", "text": ""}
			for _, part := range anthropicPieces(b.Text) {
				deltas = append(deltas, map[string]any{"type": "text_delta", "text": part})
			}
		}
		send("content_block_start", map[string]any{"index": i, "content_block": first})
		for _, d := range deltas {
			send("content_block_delta", map[string]any{"index": i, "delta": d})
		}
		send("content_block_stop", map[string]any{"index": i})
	}
	send("message_delta", map[string]any{
		"delta": map[string]any{"stop_reason": m.Stop, "stop_sequence": nil},
		"usage": map[string]any{"output_tokens": m.OutputTokens},
	})
	send("message_stop", map[string]any{})
}

// anthropicPieces cuts s into a few pieces, each ending after a space, as a
// model's deltas arrive.
func anthropicPieces(s string) []string {
	var parts []string
	for len(s) > 0 {
		i := strings.IndexByte(s, ' ')
		if i < 0 {
			i = len(s) - 1
		}
		parts = append(parts, s[:i+1])
		s = s[i+1:]
	}
	if len(parts) == 0 {
		parts = []string{""}
	}
	return parts
}

// anthropicErrorType is the error type Anthropic names for a status.
func anthropicErrorType(status int) string {
	switch status {
	case http.StatusBadRequest:
		return "invalid_request_error"
	case http.StatusUnauthorized:
		return "authentication_error"
	case http.StatusForbidden:
		return "permission_error"
	case http.StatusNotFound:
		return "not_found_error"
	case http.StatusRequestEntityTooLarge:
		return "request_too_large"
	case http.StatusTooManyRequests:
		return "rate_limit_error"
	case 529:
		return "overloaded_error"
	default:
		return "api_error"
	}
}

// anthropicError answers Anthropic's error body.
func anthropicError(w http.ResponseWriter, status int, typ, message string) int {
	return anthropicJSON(w, status, map[string]any{
		"type":  "error",
		"error": map[string]any{"type": typ, "message": message},
	})
}

func anthropicJSON(w http.ResponseWriter, status int, v any) int {
	b, _ := json.Marshal(v)
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(b)))
	w.WriteHeader(status)
	w.Write(b)
	return status
}

func anthropicID() string {
	b := make([]byte, 12)
	rand.Read(b)
	return hex.EncodeToString(b)
}
