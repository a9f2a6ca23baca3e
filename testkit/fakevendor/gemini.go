package fakevendor

import (
	"encoding/json"
	"fmt"
	"net/http"
	"path"
	"strings"
)

// Gemini is the Gemini API (generativelanguage.googleapis.com) as Gemini
// CLI uses it with an API key: POST /v1beta/models/{model}:streamGenerateContent
// (server-sent events of GenerateContentResponse chunks) for the
// conversation, :generateContent for its utility calls (the next-speaker
// check, the model router, loop detection: JSON answers to a schema), and
// :countTokens.
//
// The conversation plays the script with the CLI's own tools: while the
// last turn carries no functionResponse, write_file (an absolute
// file_path) and run_shell_command; once it does, the final message.
type Gemini struct{}

var _ Vendor = Gemini{}

// Gemini CLI's tool names and parameters (packages/core tool-names).
const (
	geminiWriteTool = "write_file"
	geminiShellTool = "run_shell_command"
)

// Hosts implements Vendor.
func (Gemini) Hosts() []string { return []string{"generativelanguage.googleapis.com"} }

// geminiRequest is the part of a GenerateContentRequest the fake reads.
type geminiRequest struct {
	Contents         []geminiContent `json:"contents"`
	GenerationConfig struct {
		ResponseMIMEType   string          `json:"responseMimeType"`
		ResponseJSONSchema json.RawMessage `json:"responseJsonSchema"`
		ResponseSchema     json.RawMessage `json:"responseSchema"`
	} `json:"generationConfig"`
}

type geminiContent struct {
	Role  string       `json:"role,omitempty"`
	Parts []geminiPart `json:"parts"`
}

type geminiPart struct {
	Text             string          `json:"text,omitempty"`
	FunctionCall     *geminiCall     `json:"functionCall,omitempty"`
	FunctionResponse json.RawMessage `json:"functionResponse,omitempty"`
}

type geminiCall struct {
	Name string         `json:"name"`
	Args map[string]any `json:"args"`
}

// Serve implements Vendor.
func (g Gemini) Serve(s *Server, w http.ResponseWriter, r *http.Request, body []byte) int {
	model, method, ok := strings.Cut(strings.TrimPrefix(r.URL.Path, "/v1beta/models/"), ":")
	if !ok || r.Method != http.MethodPost || !strings.HasPrefix(r.URL.Path, "/v1beta/models/") || strings.Contains(model, "/") {
		return geminiError(w, http.StatusNotFound, fmt.Sprintf("%s %s is not a method the fake Gemini API knows.", r.Method, r.URL.Path))
	}
	var req geminiRequest
	if err := json.Unmarshal(body, &req); err != nil {
		return geminiError(w, http.StatusBadRequest, "Invalid JSON payload received: "+err.Error())
	}
	switch method {
	case "countTokens":
		return geminiJSON(w, map[string]any{"totalTokens": geminiTokens(req.Contents)})
	case "streamGenerateContent", "generateContent":
	default:
		return geminiError(w, http.StatusNotFound, fmt.Sprintf("Method %s of models/%s is not found for the fake Gemini API.", method, model))
	}
	if f, ok := s.nextFault(); ok {
		return geminiError(w, f.status, f.body)
	}
	resp := g.answer(s.Script, model, req)
	if method == "generateContent" {
		return geminiJSON(w, resp)
	}
	e := newSSE(w)
	for _, chunk := range geminiChunks(model, resp) {
		data, _ := json.Marshal(chunk)
		e.event("", data)
	}
	return http.StatusOK
}

// geminiChunks is resp as the API streams it: the parts one chunk each,
// the finish reason and usage on the last.
func geminiChunks(model string, resp map[string]any) []map[string]any {
	cand := resp["candidates"].([]map[string]any)[0]
	parts := cand["content"].(geminiContent).Parts
	var out []map[string]any
	for i, p := range parts {
		c := map[string]any{"content": geminiContent{Role: "model", Parts: []geminiPart{p}}, "index": 0}
		chunk := map[string]any{"candidates": []map[string]any{c}, "modelVersion": model, "responseId": resp["responseId"]}
		if i == len(parts)-1 {
			c["finishReason"] = "STOP"
			chunk["usageMetadata"] = resp["usageMetadata"]
		}
		out = append(out, chunk)
	}
	return out
}

// answer is the GenerateContentResponse for req: a JSON document for a
// utility call with a response schema, else the script's next turn.
func (Gemini) answer(sc Script, model string, req geminiRequest) map[string]any {
	var parts []geminiPart
	schema := req.GenerationConfig.ResponseJSONSchema
	if len(schema) == 0 {
		schema = req.GenerationConfig.ResponseSchema
	}
	switch {
	case len(schema) > 0:
		var sch map[string]any
		json.Unmarshal(schema, &sch)
		doc, _ := json.Marshal(fillSchema(sch))
		parts = []geminiPart{{Text: string(doc)}}
	case !lastTurnHasResponses(req.Contents):
		file := sc.File
		if sc.Dir != "" {
			file = path.Join(sc.Dir, sc.File)
		}
		parts = []geminiPart{
			{FunctionCall: &geminiCall{Name: geminiWriteTool, Args: map[string]any{"file_path": file, "content": sc.Content}}},
			{FunctionCall: &geminiCall{Name: geminiShellTool, Args: map[string]any{"command": sc.Shell}}},
		}
	default:
		parts = []geminiPart{{Text: sc.Final}}
	}
	return map[string]any{
		"candidates": []map[string]any{{
			"content":      geminiContent{Role: "model", Parts: parts},
			"finishReason": "STOP",
			"index":        0,
		}},
		"usageMetadata": map[string]any{"promptTokenCount": 100, "candidatesTokenCount": 20, "totalTokenCount": 120},
		"modelVersion":  model,
		"responseId":    "fake-gemini-response",
	}
}

// geminiTokens is a rough count of the tokens of contents.
func geminiTokens(contents []geminiContent) int {
	n := 0
	for _, c := range contents {
		for _, p := range c.Parts {
			n += len(p.Text)/4 + 1
		}
	}
	return n
}

// lastTurnHasResponses says whether the conversation's last turn carries
// the tools' results.
func lastTurnHasResponses(contents []geminiContent) bool {
	if len(contents) == 0 {
		return false
	}
	for _, p := range contents[len(contents)-1].Parts {
		if len(p.FunctionResponse) > 0 {
			return true
		}
	}
	return false
}

// geminiAnswers are the values of Gemini CLI's utility schemas' fields
// that let it go on: its next-speaker check hears that the model is done
// (the user speaks next), its router that the task is simple, its loop
// detection that there is no loop.
var geminiAnswers = map[string]any{
	"next_speaker":                  "user",
	"model_choice":                  "flash",
	"complexity_score":              1,
	"unproductive_state_confidence": 0,
}

// fillSchema makes a value of a JSON schema: a field of geminiAnswers
// gets its answer, an enum its first value, a number its minimum (else
// 0), a boolean false, a string a short text.
func fillSchema(sch map[string]any) any {
	if e, ok := sch["enum"].([]any); ok && len(e) > 0 {
		return e[0]
	}
	typ, _ := sch["type"].(string)
	switch strings.ToLower(typ) {
	case "object":
		out := map[string]any{}
		props, _ := sch["properties"].(map[string]any)
		for k, v := range props {
			if a, ok := geminiAnswers[k]; ok {
				out[k] = a
				continue
			}
			sub, _ := v.(map[string]any)
			out[k] = fillSchema(sub)
		}
		return out
	case "array":
		return []any{}
	case "number", "integer":
		if m, ok := sch["minimum"].(float64); ok {
			return m
		}
		return 0
	case "boolean":
		return false
	default:
		return "Scripted by the fake Gemini API."
	}
}

// geminiStatus is Google's status name for an HTTP status.
func geminiStatus(code int) string {
	switch code {
	case http.StatusBadRequest:
		return "INVALID_ARGUMENT"
	case http.StatusUnauthorized:
		return "UNAUTHENTICATED"
	case http.StatusForbidden:
		return "PERMISSION_DENIED"
	case http.StatusNotFound:
		return "NOT_FOUND"
	case http.StatusTooManyRequests:
		return "RESOURCE_EXHAUSTED"
	case http.StatusServiceUnavailable:
		return "UNAVAILABLE"
	case http.StatusGatewayTimeout:
		return "DEADLINE_EXCEEDED"
	case http.StatusInternalServerError:
		return "INTERNAL"
	default:
		return "UNKNOWN"
	}
}

// geminiError answers Google's error JSON.
func geminiError(w http.ResponseWriter, code int, message string) int {
	body, _ := json.Marshal(map[string]any{"error": map[string]any{"code": code, "message": message, "status": geminiStatus(code)}})
	w.Header().Set("Content-Type", "application/json; charset=UTF-8")
	w.WriteHeader(code)
	w.Write(body)
	return code
}

func geminiJSON(w http.ResponseWriter, v any) int {
	body, _ := json.Marshal(v)
	w.Header().Set("Content-Type", "application/json; charset=UTF-8")
	w.WriteHeader(http.StatusOK)
	w.Write(body)
	return http.StatusOK
}
