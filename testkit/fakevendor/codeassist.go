package fakevendor

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
)

// CodeAssist is Google's Code Assist API (cloudcode-pa.googleapis.com) as
// Gemini CLI uses it signed in with a Google account ("Login with
// Google"), and the account's user info (www.googleapis.com). Every
// method is POST /v1internal:{method} with a JSON body, except GET
// /v1internal:getCodeAssistGlobalUserSetting; the credential is the
// account's access token as "Authorization: Bearer".
//
// The setup methods answer a user who is already onboarded
// (loadCodeAssist gives a current tier and a project), so the CLI goes
// straight to the model. The model methods (streamGenerateContent with
// ?alt=sse, generateContent, countTokens) carry a Gemini API request
// wrapped as {model, project, user_prompt_id, request} and answer its
// response wrapped as {response, traceId}; they play the script as
// Gemini does.
type CodeAssist struct{}

var _ Vendor = CodeAssist{}

// CodeAssistProject is the Google Cloud project the fake's loadCodeAssist
// gives the CLI.
const CodeAssistProject = "airlock-fake-project"

// CodeAssistEmail is the account's address the fake's user info gives.
const CodeAssistEmail = "airlock-test@example.com"

// Hosts implements Vendor.
func (CodeAssist) Hosts() []string {
	return []string{"cloudcode-pa.googleapis.com", "www.googleapis.com"}
}

// codeAssistRequest is the wrapped request of the model methods.
type codeAssistRequest struct {
	Model   string        `json:"model"`
	Project string        `json:"project"`
	Request geminiRequest `json:"request"`
}

// Serve implements Vendor.
func (c CodeAssist) Serve(s *Server, w http.ResponseWriter, r *http.Request, body []byte) int {
	if r.Host == "www.googleapis.com" || strings.HasPrefix(r.Host, "www.googleapis.com:") {
		if r.Method != http.MethodGet || r.URL.Path != "/oauth2/v2/userinfo" {
			return geminiError(w, http.StatusNotFound, fmt.Sprintf("%s %s is not a method the fake Google APIs know.", r.Method, r.URL.Path))
		}
		return geminiJSON(w, map[string]any{"id": "1000000000000000000000", "email": CodeAssistEmail, "verified_email": true})
	}
	method, ok := strings.CutPrefix(r.URL.Path, "/v1internal:")
	if !ok {
		return geminiError(w, http.StatusNotFound, fmt.Sprintf("%s %s is not a method the fake Code Assist API knows.", r.Method, r.URL.Path))
	}
	if method == "getCodeAssistGlobalUserSetting" {
		if r.Method != http.MethodGet {
			return geminiError(w, http.StatusMethodNotAllowed, method+" is GET")
		}
		return geminiJSON(w, map[string]any{"freeTierDataCollectionOptin": false})
	}
	if r.Method != http.MethodPost {
		return geminiError(w, http.StatusMethodNotAllowed, fmt.Sprintf("%s of %s: the fake Code Assist API takes POST", r.Method, method))
	}
	switch method {
	case "loadCodeAssist":
		tier := map[string]any{"id": "standard-tier", "name": "Gemini Code Assist (fake)", "hasOnboardedPreviously": true}
		return geminiJSON(w, map[string]any{"currentTier": tier, "allowedTiers": []any{tier}, "cloudaicompanionProject": CodeAssistProject})
	case "onboardUser":
		return geminiJSON(w, map[string]any{"done": true, "response": map[string]any{"cloudaicompanionProject": map[string]any{"id": CodeAssistProject}}})
	case "retrieveUserQuota":
		return geminiJSON(w, map[string]any{"buckets": []any{}})
	case "listExperiments":
		return geminiJSON(w, map[string]any{"experimentIds": []any{}, "flags": []any{}})
	case "fetchAdminControls", "recordCodeAssistMetrics", "setCodeAssistGlobalUserSetting":
		return geminiJSON(w, map[string]any{})
	case "countTokens", "generateContent", "streamGenerateContent":
	default:
		return geminiError(w, http.StatusNotFound, fmt.Sprintf("Method %s is not found for the fake Code Assist API.", method))
	}
	var req codeAssistRequest
	if err := json.Unmarshal(body, &req); err != nil {
		return geminiError(w, http.StatusBadRequest, "Invalid JSON payload received: "+err.Error())
	}
	if method == "countTokens" {
		return geminiJSON(w, map[string]any{"totalTokens": geminiTokens(req.Request.Contents)})
	}
	if req.Model == "" || req.Project != CodeAssistProject {
		return geminiError(w, http.StatusBadRequest, fmt.Sprintf("%s wants the model and the project loadCodeAssist gave (%s); got model %q, project %q", method, CodeAssistProject, req.Model, req.Project))
	}
	if f, ok := s.nextFault(); ok {
		return geminiError(w, f.status, f.body)
	}
	resp := Gemini{}.answer(s.Script, req.Model, req.Request)
	const trace = "fake-code-assist-trace"
	if method == "generateContent" {
		return geminiJSON(w, map[string]any{"response": resp, "traceId": trace})
	}
	if r.URL.Query().Get("alt") != "sse" {
		return geminiError(w, http.StatusBadRequest, "streamGenerateContent wants ?alt=sse")
	}
	e := newSSE(w)
	for _, chunk := range geminiChunks(req.Model, resp) {
		data, _ := json.Marshal(map[string]any{"response": chunk, "traceId": trace})
		e.event("", data)
	}
	return http.StatusOK
}
