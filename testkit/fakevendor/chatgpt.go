package fakevendor

import (
	"fmt"
	"net/http"
	"strings"

	"github.com/klauspost/compress/zstd"
)

// ChatGPT is the fake of chatgpt.com's backend API as Codex CLI uses it
// when signed in with ChatGPT (auth.json's auth_mode "chatgpt"): every
// request carries Authorization: Bearer with the access token and
// ChatGPT-Account-ID. The model is the Responses API under
// /backend-api/codex/responses, played as OpenAI plays it (a WebSocket
// upgrade refused with 426, then POST streamed as server-sent events),
// its request bodies compressed with zstd (the Server decodes them).
// Before a turn Codex asks /backend-api/wham/accounts/check where the
// account's workspace is, and fails the turn when it is not answered;
// its other side requests (settings, plugins, MCP, analytics, its models
// catalog) get minimal answers.
type ChatGPT struct {
	OpenAI OpenAI
}

var _ Vendor = (*ChatGPT)(nil)

// Hosts is the backend's host.
func (c *ChatGPT) Hosts() []string { return []string{"chatgpt.com"} }

const chatGPTResponses = "/backend-api/codex/responses"

// Serve answers one request.
func (c *ChatGPT) Serve(s *Server, w http.ResponseWriter, r *http.Request, body []byte) int {
	p := r.URL.Path
	switch {
	case p == chatGPTResponses && r.Header.Get("Upgrade") != "":
		w.WriteHeader(http.StatusUpgradeRequired)
		return http.StatusUpgradeRequired
	case r.Method == http.MethodPost && p == chatGPTResponses:
		if enc := r.Header.Get("Content-Encoding"); enc != "" && enc != "zstd" {
			return openAIError(w, http.StatusUnsupportedMediaType, "fakevendor: unsupported Content-Encoding "+enc)
		}
		return c.OpenAI.respond(s, w, body)
	case r.Method == http.MethodGet && p == "/backend-api/wham/accounts/check":
		// Where the account's workspace is served: here.
		account := r.Header.Get("ChatGPT-Account-ID")
		if account == "" {
			return openAIError(w, http.StatusBadRequest, "fakevendor: no ChatGPT-Account-ID header")
		}
		writeOpenAIJSON(w, http.StatusOK, map[string]any{"accounts": []any{map[string]any{
			"id": account, "workspace_backend_origin": "https://chatgpt.com", "account_routing_override": "NO_CONSTRAINT",
		}}})
		return http.StatusOK
	case r.Method == http.MethodGet && p == "/backend-api/codex/models":
		// An empty catalog: Codex keeps the one built into it.
		writeOpenAIJSON(w, http.StatusOK, map[string]any{"models": []any{}})
		return http.StatusOK
	case r.Method == http.MethodGet && p == "/backend-api/wham/settings/user",
		strings.HasPrefix(p, "/backend-api/ps/plugins/"),
		r.Method == http.MethodPost && p == "/backend-api/codex/analytics-events/events":
		writeOpenAIJSON(w, http.StatusOK, map[string]any{})
		return http.StatusOK
	case r.Method == http.MethodPost && p == "/backend-api/ps/mcp":
		// No MCP server for this account.
		return openAIError(w, http.StatusNotFound, "fakevendor: no MCP server")
	default:
		return openAIError(w, http.StatusNotFound, fmt.Sprintf("fakevendor: no such endpoint %s %s", r.Method, p))
	}
}

// decodeBody is a request's body as sent before its Content-Encoding
// (zstd), or body itself.
func decodeBody(encoding string, body []byte) ([]byte, error) {
	if encoding != "zstd" {
		return body, nil
	}
	d, err := zstd.NewReader(nil, zstd.WithDecoderMaxMemory(64<<20), zstd.WithDecoderConcurrency(1))
	if err != nil {
		return nil, err
	}
	defer d.Close()
	return d.DecodeAll(body, nil)
}
