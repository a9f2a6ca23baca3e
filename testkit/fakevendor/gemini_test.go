package fakevendor

import (
	"bufio"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

var geminiScript = Script{
	Dir:     "/workspace",
	File:    "notes/hello.txt",
	Content: "Hello.\n",
	Shell:   "expr 6 '*' 7 | tee shell.out",
	Final:   "Done: the file is written.",
}

const geminiBase = "https://generativelanguage.googleapis.com/v1beta/models/gemini-3.8-flash"

// geminiClient reaches s under the vendor's name, as the proxy does.
func geminiClient(s *Server) *http.Client { return testClient(s) }

func geminiPost(t *testing.T, c *http.Client, url string, body any) *http.Response {
	t.Helper()
	return send(t, c, http.MethodPost, url, http.Header{"x-goog-api-key": {"test-key"}}, body)
}

// geminiChunk is a GenerateContentResponse as the client reads it.
type geminiChunk struct {
	Candidates []struct {
		Content      geminiContent `json:"content"`
		FinishReason string        `json:"finishReason"`
	} `json:"candidates"`
	UsageMetadata map[string]int `json:"usageMetadata"`
}

// readStream reads a server-sent event stream the way the Gemini SDK
// does: every event one "data:" line of JSON.
func readStream(t *testing.T, resp *http.Response) []geminiChunk {
	t.Helper()
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("stream: %s %s: %s", resp.Status, resp.Header.Get("Content-Type"), b)
	}
	var chunks []geminiChunk
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	var event []string
	for sc.Scan() {
		line := sc.Text()
		if line != "" {
			event = append(event, line)
			continue
		}
		if len(event) != 1 || !strings.HasPrefix(event[0], "data: ") {
			t.Fatalf("an event is not one data line: %q", event)
		}
		var c geminiChunk
		if err := json.Unmarshal([]byte(strings.TrimPrefix(event[0], "data: ")), &c); err != nil {
			t.Fatalf("event %q: %v", event[0], err)
		}
		chunks = append(chunks, c)
		event = nil
	}
	if len(event) > 0 {
		t.Fatalf("the stream ends in an unfinished event: %q", event)
	}
	if len(chunks) == 0 {
		t.Fatal("an empty stream")
	}
	return chunks
}

// parts are the stream's parts in order; finish is the last chunk's
// finish reason, which no earlier chunk may carry.
func parts(t *testing.T, chunks []geminiChunk) (ps []geminiPart, finish string) {
	t.Helper()
	for i, c := range chunks {
		if len(c.Candidates) != 1 {
			t.Fatalf("chunk %d has %d candidates", i, len(c.Candidates))
		}
		cand := c.Candidates[0]
		if cand.Content.Role != "model" {
			t.Errorf("chunk %d's role is %q", i, cand.Content.Role)
		}
		ps = append(ps, cand.Content.Parts...)
		if i < len(chunks)-1 && cand.FinishReason != "" {
			t.Errorf("chunk %d of %d carries finishReason %s", i, len(chunks), cand.FinishReason)
		}
		finish = cand.FinishReason
	}
	if chunks[len(chunks)-1].UsageMetadata["totalTokenCount"] == 0 {
		t.Error("the last chunk has no usage")
	}
	return ps, finish
}

func TestGeminiToolCallsThenFinal(t *testing.T) {
	s := Start(t, geminiScript, Gemini{})
	c := geminiClient(s)
	user := geminiContent{Role: "user", Parts: []geminiPart{{Text: "Write the file."}}}

	ps, finish := parts(t, readStream(t, geminiPost(t, c, geminiBase+":streamGenerateContent?alt=sse",
		map[string]any{"contents": []geminiContent{user}})))
	if finish != "STOP" {
		t.Errorf("the first turn's finishReason is %q, want STOP", finish)
	}
	var calls []geminiCall
	for _, p := range ps {
		if p.FunctionCall == nil {
			t.Errorf("the first turn has a part that is no function call: %+v", p)
			continue
		}
		calls = append(calls, *p.FunctionCall)
	}
	want := []geminiCall{
		{Name: "write_file", Args: map[string]any{"file_path": "/workspace/notes/hello.txt", "content": "Hello.\n"}},
		{Name: "run_shell_command", Args: map[string]any{"command": "expr 6 '*' 7 | tee shell.out"}},
	}
	if d := cmp.Diff(want, calls); d != "" {
		t.Errorf("the first turn's calls (-want +got):\n%s", d)
	}

	// The tools' results come back: the final message.
	model := geminiContent{Role: "model", Parts: ps}
	results := geminiContent{Role: "user", Parts: []geminiPart{
		{FunctionResponse: json.RawMessage(`{"name":"write_file","response":{"output":"ok"}}`)},
		{FunctionResponse: json.RawMessage(`{"name":"run_shell_command","response":{"output":"42"}}`)},
	}}
	ps, finish = parts(t, readStream(t, geminiPost(t, c, geminiBase+":streamGenerateContent?alt=sse",
		map[string]any{"contents": []geminiContent{user, model, results}})))
	if len(ps) != 1 || ps[0].Text != geminiScript.Final || finish != "STOP" {
		t.Errorf("the second turn is %+v (%s), want the final message %q and STOP", ps, finish, geminiScript.Final)
	}

	// A reply after the final message starts the script again.
	reply := geminiContent{Role: "user", Parts: []geminiPart{{Text: "Once more."}}}
	final := geminiContent{Role: "model", Parts: ps}
	ps, _ = parts(t, readStream(t, geminiPost(t, c, geminiBase+":streamGenerateContent?alt=sse",
		map[string]any{"contents": []geminiContent{user, model, results, final, reply}})))
	if len(ps) != 2 || ps[0].FunctionCall == nil || ps[1].FunctionCall == nil {
		t.Errorf("a reply's turn is %+v, want the two function calls", ps)
	}

	reqs := s.Requests()
	if len(reqs) != 3 {
		t.Fatalf("%d requests recorded, want 3", len(reqs))
	}
	for _, r := range reqs {
		if r.Host != "generativelanguage.googleapis.com" || r.Path != "/v1beta/models/gemini-3.8-flash:streamGenerateContent" ||
			r.Query != "alt=sse" || r.Header.Get("x-goog-api-key") != "test-key" || r.Status != http.StatusOK {
			t.Errorf("recorded %s %s%s?%s → %d, key %q", r.Method, r.Host, r.Path, r.Query, r.Status, r.Header.Get("x-goog-api-key"))
		}
	}
}

// Gemini CLI's utility calls ask generateContent for JSON to a schema
// (upper-case types, as the SDK sends them).
func TestGeminiUtilityJSON(t *testing.T) {
	s := Start(t, geminiScript, Gemini{})
	c := geminiClient(s)
	tests := []struct {
		name   string
		schema string
		want   map[string]any
	}{
		{"next speaker", `{"type":"OBJECT","properties":{"reasoning":{"type":"STRING"},"next_speaker":{"type":"STRING","enum":["user","model"]}}}`,
			map[string]any{"reasoning": "Scripted by the fake Gemini API.", "next_speaker": "user"}},
		{"router", `{"type":"OBJECT","properties":{"complexity_reasoning":{"type":"STRING"},"complexity_score":{"type":"INTEGER"}}}`,
			map[string]any{"complexity_reasoning": "Scripted by the fake Gemini API.", "complexity_score": 1.0}},
		{"loop detection", `{"type":"object","properties":{"unproductive_state_analysis":{"type":"string"},"unproductive_state_confidence":{"type":"number"}}}`,
			map[string]any{"unproductive_state_analysis": "Scripted by the fake Gemini API.", "unproductive_state_confidence": 0.0}},
		{"any other", `{"type":"object","properties":{"n":{"type":"number","minimum":3},"ok":{"type":"boolean"},"xs":{"type":"array"}}}`,
			map[string]any{"n": 3.0, "ok": false, "xs": []any{}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp := geminiPost(t, c, geminiBase+"-lite:generateContent", map[string]any{
				"contents":         []geminiContent{{Role: "user", Parts: []geminiPart{{Text: "Classify."}}}},
				"generationConfig": map[string]any{"responseMimeType": "application/json", "responseJsonSchema": json.RawMessage(tt.schema)},
			})
			var got geminiChunk
			if err := json.NewDecoder(resp.Body).Decode(&got); err != nil || resp.StatusCode != http.StatusOK {
				t.Fatalf("%s: %v", resp.Status, err)
			}
			if len(got.Candidates) != 1 || got.Candidates[0].FinishReason != "STOP" || len(got.Candidates[0].Content.Parts) != 1 {
				t.Fatalf("answer %+v", got)
			}
			var doc map[string]any
			if err := json.Unmarshal([]byte(got.Candidates[0].Content.Parts[0].Text), &doc); err != nil {
				t.Fatalf("the answer's text is no JSON: %v", err)
			}
			if d := cmp.Diff(tt.want, doc); d != "" {
				t.Errorf("(-want +got):\n%s", d)
			}
		})
	}
}

func TestGeminiCountTokens(t *testing.T) {
	s := Start(t, geminiScript, Gemini{})
	resp := geminiPost(t, geminiClient(s), geminiBase+":countTokens", map[string]any{
		"contents": []geminiContent{{Role: "user", Parts: []geminiPart{{Text: "Count these words, please."}}}},
	})
	var got struct{ TotalTokens int }
	if err := json.NewDecoder(resp.Body).Decode(&got); err != nil || resp.StatusCode != http.StatusOK || got.TotalTokens == 0 {
		t.Errorf("countTokens: %s, %+v, %v", resp.Status, got, err)
	}
}

// Fail answers the next model request with Google's error JSON, then
// the script goes on.
func TestGeminiFail(t *testing.T) {
	s := Start(t, geminiScript, Gemini{})
	c := geminiClient(s)
	s.Fail(http.StatusTooManyRequests, "Quota exceeded for the test.")
	s.Fail(http.StatusInternalServerError, "An internal error has occurred.")
	body := map[string]any{"contents": []geminiContent{{Role: "user", Parts: []geminiPart{{Text: "Hi."}}}}}
	type apiError struct {
		Error struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
			Status  string `json:"status"`
		} `json:"error"`
	}
	for _, want := range []struct {
		code            int
		status, message string
	}{
		{429, "RESOURCE_EXHAUSTED", "Quota exceeded for the test."},
		{500, "INTERNAL", "An internal error has occurred."},
	} {
		resp := geminiPost(t, c, geminiBase+":streamGenerateContent?alt=sse", body)
		var got apiError
		if err := json.NewDecoder(resp.Body).Decode(&got); err != nil {
			t.Fatalf("the %d's body: %v", want.code, err)
		}
		if resp.StatusCode != want.code || got.Error.Code != want.code || got.Error.Status != want.status || got.Error.Message != want.message {
			t.Errorf("got %s %+v, want %d %s %q", resp.Status, got, want.code, want.status, want.message)
		}
		if !strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") {
			t.Errorf("the error's Content-Type is %q", resp.Header.Get("Content-Type"))
		}
	}
	readStream(t, geminiPost(t, c, geminiBase+":streamGenerateContent?alt=sse", body))
	var statuses []int
	for _, r := range s.Requests() {
		statuses = append(statuses, r.Status)
	}
	if d := cmp.Diff([]int{429, 500, 200}, statuses); d != "" {
		t.Errorf("recorded statuses (-want +got):\n%s", d)
	}
}

func TestGeminiUnknown(t *testing.T) {
	s := Start(t, geminiScript, Gemini{})
	c := geminiClient(s)
	for _, url := range []string{
		"https://generativelanguage.googleapis.com/v1beta/models/gemini-3.8-flash:embedContent",
		"https://generativelanguage.googleapis.com/v1beta/files",
	} {
		resp := geminiPost(t, c, url, map[string]any{})
		var got struct {
			Error struct {
				Code   int
				Status string
			}
		}
		if err := json.NewDecoder(resp.Body).Decode(&got); err != nil || resp.StatusCode != 404 || got.Error.Status != "NOT_FOUND" {
			t.Errorf("%s: %s %+v %v, want Google's 404", url, resp.Status, got, err)
		}
	}
}
