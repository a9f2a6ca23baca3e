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

const codeAssistBase = "https://cloudcode-pa.googleapis.com/v1internal:"

// codeAssistCall sends one request with a Bearer token, as Gemini CLI
// signed in with Google does.
func codeAssistCall(t *testing.T, c *http.Client, method, url string, body any) *http.Response {
	t.Helper()
	return send(t, c, method, url, http.Header{"Authorization": {"Bearer ya29.test-token"}}, body)
}

func decodeJSON(t *testing.T, resp *http.Response, v any) {
	t.Helper()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("%s %s: %s", resp.Request.URL.Path, resp.Status, b)
	}
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("%s: %v: %s", resp.Request.URL.Path, err, b)
	}
}

// codeAssistStream reads the wrapped chunks of a stream: each event one
// data line of {response, traceId}, as the CLI's reader wants them.
func codeAssistStream(t *testing.T, resp *http.Response) []geminiChunk {
	t.Helper()
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("stream: %s %s: %s", resp.Status, resp.Header.Get("Content-Type"), b)
	}
	var chunks []geminiChunk
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			if sc.Text() != "" {
				t.Fatalf("a line that is no data: %q", sc.Text())
			}
			continue
		}
		var w struct {
			Response *geminiChunk `json:"response"`
			TraceID  string       `json:"traceId"`
		}
		if err := json.Unmarshal([]byte(line), &w); err != nil || w.Response == nil || w.TraceID == "" {
			t.Fatalf("event %q is not {response, traceId} (%v)", line, err)
		}
		chunks = append(chunks, *w.Response)
	}
	if len(chunks) == 0 {
		t.Fatal("an empty stream")
	}
	return chunks
}

// The setup the CLI does before its first model call: the user is
// onboarded, with a project, so no onboarding follows.
func TestCodeAssistSetup(t *testing.T) {
	s := Start(t, geminiScript, CodeAssist{})
	c := geminiClient(s)
	var info struct{ Email string }
	decodeJSON(t, codeAssistCall(t, c, "GET", "https://www.googleapis.com/oauth2/v2/userinfo", nil), &info)
	if info.Email != CodeAssistEmail {
		t.Errorf("userinfo email %q", info.Email)
	}
	var load struct {
		CurrentTier             struct{ ID string }
		CloudaicompanionProject string
	}
	decodeJSON(t, codeAssistCall(t, c, "POST", codeAssistBase+"loadCodeAssist", map[string]any{"metadata": map[string]any{"pluginType": "GEMINI"}}), &load)
	if load.CurrentTier.ID == "" || load.CloudaicompanionProject != CodeAssistProject {
		t.Errorf("loadCodeAssist: %+v, want a current tier and the project", load)
	}
	for _, m := range []string{"retrieveUserQuota", "listExperiments", "fetchAdminControls", "recordCodeAssistMetrics"} {
		var v map[string]any
		decodeJSON(t, codeAssistCall(t, c, "POST", codeAssistBase+m, map[string]any{"project": CodeAssistProject}), &v)
	}
	var setting map[string]any
	decodeJSON(t, codeAssistCall(t, c, "GET", codeAssistBase+"getCodeAssistGlobalUserSetting", nil), &setting)
	var tokens struct{ TotalTokens int }
	decodeJSON(t, codeAssistCall(t, c, "POST", codeAssistBase+"countTokens", map[string]any{"request": map[string]any{
		"model": "models/gemini-3.8-flash", "contents": []geminiContent{{Role: "user", Parts: []geminiPart{{Text: "Count these."}}}}}}), &tokens)
	if tokens.TotalTokens == 0 {
		t.Error("countTokens counted none")
	}
	for _, r := range s.Requests() {
		if r.Header.Get("Authorization") != "Bearer ya29.test-token" || r.Status != http.StatusOK {
			t.Errorf("recorded %s %s%s → %d, Authorization %q", r.Method, r.Host, r.Path, r.Status, r.Header.Get("Authorization"))
		}
	}
}

// The model calls carry the Gemini API's request wrapped with the model
// and project, and play the script.
func TestCodeAssistToolCallsThenFinal(t *testing.T) {
	s := Start(t, geminiScript, CodeAssist{})
	c := geminiClient(s)
	wrap := func(contents ...geminiContent) map[string]any {
		return map[string]any{"model": "gemini-3.8-flash", "project": CodeAssistProject, "user_prompt_id": "p1",
			"request": map[string]any{"contents": contents, "session_id": "s1"}}
	}
	user := geminiContent{Role: "user", Parts: []geminiPart{{Text: "Write the file."}}}
	ps, finish := parts(t, codeAssistStream(t, codeAssistCall(t, c, "POST", codeAssistBase+"streamGenerateContent?alt=sse", wrap(user))))
	var names []string
	for _, p := range ps {
		if p.FunctionCall != nil {
			names = append(names, p.FunctionCall.Name)
		}
	}
	if d := cmp.Diff([]string{"write_file", "run_shell_command"}, names); d != "" || finish != "STOP" {
		t.Errorf("the first turn's calls (-want +got):\n%s (finish %s)", d, finish)
	}
	results := geminiContent{Role: "user", Parts: []geminiPart{{FunctionResponse: json.RawMessage(`{"name":"run_shell_command","response":{"output":"42"}}`)}}}
	ps, _ = parts(t, codeAssistStream(t, codeAssistCall(t, c, "POST", codeAssistBase+"streamGenerateContent?alt=sse", wrap(user, geminiContent{Role: "model", Parts: ps}, results))))
	if len(ps) != 1 || ps[0].Text != geminiScript.Final {
		t.Errorf("the second turn is %+v, want the final message", ps)
	}

	// A utility call: generateContent to a schema, wrapped.
	body := wrap(user)
	body["request"].(map[string]any)["generationConfig"] = map[string]any{"responseJsonSchema": json.RawMessage(`{"type":"object","properties":{"next_speaker":{"type":"string"}}}`)}
	var got struct {
		Response geminiChunk
		TraceID  string
	}
	decodeJSON(t, codeAssistCall(t, c, "POST", codeAssistBase+"generateContent", body), &got)
	if len(got.Response.Candidates) != 1 || got.TraceID == "" || !strings.Contains(got.Response.Candidates[0].Content.Parts[0].Text, `"next_speaker":"user"`) {
		t.Errorf("generateContent: %+v", got)
	}

	// A model call without the project loadCodeAssist gave is refused.
	bad := wrap(user)
	bad["project"] = ""
	if resp := codeAssistCall(t, c, "POST", codeAssistBase+"generateContent", bad); resp.StatusCode != http.StatusBadRequest {
		t.Errorf("no project: %s, want 400", resp.Status)
	}
}

func TestCodeAssistFailAndUnknown(t *testing.T) {
	s := Start(t, geminiScript, CodeAssist{})
	c := geminiClient(s)
	s.Fail(http.StatusTooManyRequests, "Quota exceeded for the test.")
	body := map[string]any{"model": "gemini-3.8-flash", "project": CodeAssistProject, "request": map[string]any{"contents": []geminiContent{{Role: "user", Parts: []geminiPart{{Text: "Hi."}}}}}}
	resp := codeAssistCall(t, c, "POST", codeAssistBase+"streamGenerateContent?alt=sse", body)
	var e struct {
		Error struct {
			Code            int
			Status, Message string
		}
	}
	if err := json.NewDecoder(resp.Body).Decode(&e); err != nil || resp.StatusCode != 429 || e.Error.Status != "RESOURCE_EXHAUSTED" || e.Error.Message != "Quota exceeded for the test." {
		t.Errorf("fault: %s %+v %v", resp.Status, e, err)
	}
	for _, u := range []string{codeAssistBase + "embedContent", "https://cloudcode-pa.googleapis.com/v1/models", "https://www.googleapis.com/drive/v3/files"} {
		if resp := codeAssistCall(t, c, "POST", u, map[string]any{}); resp.StatusCode != http.StatusNotFound {
			t.Errorf("%s: %s, want 404", u, resp.Status)
		}
	}
}
