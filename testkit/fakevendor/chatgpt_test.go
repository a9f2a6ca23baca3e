package fakevendor

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/klauspost/compress/zstd"
)

// chatGPTDo sends a request to chatgpt.com as Codex does when signed in
// with ChatGPT; a POST's body is compressed with zstd.
func chatGPTDo(t *testing.T, srv *Server, method, path string, body any) (*http.Response, []byte) {
	t.Helper()
	var rd io.Reader
	if body != nil {
		data, err := json.Marshal(body)
		if err != nil {
			t.Fatal(err)
		}
		enc, err := zstd.NewWriter(nil)
		if err != nil {
			t.Fatal(err)
		}
		rd = bytes.NewReader(enc.EncodeAll(data, nil))
		enc.Close()
	}
	req, err := http.NewRequest(method, "https://chatgpt.com"+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer access-token")
	req.Header.Set("ChatGPT-Account-ID", "acct-1")
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Content-Encoding", "zstd")
	}
	resp, err := openAIClient(srv).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, raw
}

func TestChatGPTTurns(t *testing.T) {
	srv := Start(t, openAIScript, &ChatGPT{})
	tools := []any{map[string]any{"type": "custom", "name": "apply_patch"}, map[string]any{"type": "function", "name": "shell_command"}}

	// Before a turn Codex asks where the account's workspace is.
	resp, raw := chatGPTDo(t, srv, http.MethodGet, "/backend-api/wham/accounts/check", nil)
	var check struct {
		Accounts []map[string]string `json:"accounts"`
	}
	if err := json.Unmarshal(raw, &check); resp.StatusCode != http.StatusOK || err != nil || len(check.Accounts) != 1 ||
		check.Accounts[0]["id"] != "acct-1" || check.Accounts[0]["workspace_backend_origin"] != "https://chatgpt.com" {
		t.Errorf("accounts/check: %d %s (%v)", resp.StatusCode, raw, err)
	}

	resp, raw = chatGPTDo(t, srv, http.MethodPost, "/backend-api/codex/responses", map[string]any{"model": "gpt-5.5", "stream": true, "tools": tools, "input": userTurn()})
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("first turn: %d %s", resp.StatusCode, raw)
	}
	items := outputItems(t, parseSSE(t, raw))
	if len(items) != 2 || items[0]["name"] != "apply_patch" || items[0]["input"] != wantPatch || items[1]["name"] != "shell_command" {
		t.Fatalf("first turn's items: %v", items)
	}
	outputs := userTurn(items[0], items[1],
		map[string]any{"type": "custom_tool_call_output", "call_id": items[0]["call_id"], "output": "Done"},
		map[string]any{"type": "function_call_output", "call_id": items[1]["call_id"], "output": "airlock-shell-42"})
	resp, raw = chatGPTDo(t, srv, http.MethodPost, "/backend-api/codex/responses", map[string]any{"model": "gpt-5.5", "stream": true, "tools": tools, "input": outputs})
	items = outputItems(t, parseSSE(t, raw))
	if resp.StatusCode != http.StatusOK || len(items) != 1 || items[0]["type"] != "message" {
		t.Fatalf("the turn after the tools: %d %v", resp.StatusCode, items)
	}

	// The recorded bodies are decoded: a test finds the tools' output.
	reqs := srv.Requests()
	if last := reqs[len(reqs)-1]; !bytes.Contains(last.Body, []byte("airlock-shell-42")) || last.Header.Get("Content-Encoding") != "zstd" {
		t.Errorf("the recorded request is not the decoded body: %q", last.Body[:min(len(last.Body), 80)])
	}
}

func TestChatGPTSideRequests(t *testing.T) {
	srv := Start(t, openAIScript, &ChatGPT{})
	for _, tt := range []struct {
		method, path string
		status       int
		body         string
	}{
		{http.MethodGet, "/backend-api/codex/models?client_version=0.169.0", http.StatusOK, `{"models":[]}`},
		{http.MethodGet, "/backend-api/wham/settings/user", http.StatusOK, `{}`},
		{http.MethodGet, "/backend-api/ps/plugins/installed?limit=200", http.StatusOK, `{}`},
		{http.MethodPost, "/backend-api/codex/analytics-events/events", http.StatusOK, `{}`},
		{http.MethodPost, "/backend-api/ps/mcp", http.StatusNotFound, `"not_found"`},
		{http.MethodGet, "/backend-api/unknown", http.StatusNotFound, "no such endpoint GET /backend-api/unknown"},
	} {
		var body any
		if tt.method == http.MethodPost {
			body = map[string]any{"events": []any{}}
		}
		resp, raw := chatGPTDo(t, srv, tt.method, tt.path, body)
		if resp.StatusCode != tt.status || !strings.Contains(string(raw), tt.body) {
			t.Errorf("%s %s: %d %s, want %d with %s", tt.method, tt.path, resp.StatusCode, raw, tt.status, tt.body)
		}
	}

	// No WebSocket: Codex falls back to HTTPS on 426.
	checkWebSocketRefused(t, srv, "https://chatgpt.com/backend-api/codex/responses")
}

func TestChatGPTFault(t *testing.T) {
	srv := Start(t, openAIScript, &ChatGPT{})
	srv.Fail(http.StatusUnauthorized, "Your authentication token has expired")
	resp, raw := chatGPTDo(t, srv, http.MethodPost, "/backend-api/codex/responses", map[string]any{"model": "m", "stream": true, "input": userTurn()})
	var body struct {
		Error struct{ Message, Type string }
	}
	if err := json.Unmarshal(raw, &body); err != nil || resp.StatusCode != http.StatusUnauthorized || body.Error.Message != "Your authentication token has expired" {
		t.Errorf("fault: %d %s (%v)", resp.StatusCode, raw, err)
	}
}
