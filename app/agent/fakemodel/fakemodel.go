// Package fakemodel is a deterministic stand-in for an AI model's API, for
// Airlock's demo agent (airlock run --agent demo) and its tests: it runs
// on the host's loopback and the demo agent in the VM reaches it through
// the egress proxy, like a real agent reaches its API. It needs no key.
//
// The protocol is Airlock's own: POST /v1/edit with a Request, answered
// with a Response of whole-file edits. It must not import vm, guest or fyne.
package fakemodel

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync"
)

// Request is what the demo agent sends: the prompt, whether it continues
// an earlier round, and the current content of the files the model asks
// for (NOTES.md).
type Request struct {
	Prompt   string            `json:"prompt"`
	Continue bool              `json:"continue"`
	Files    map[string]string `json:"files,omitempty"`
}

// Edit replaces a file's whole content (relative path).
type Edit struct {
	Path    string `json:"path"`
	Content string `json:"content"`
}

// Response is the model's answer: edits to make, the summary for
// .airlock/summary.md and a final message.
type Response struct {
	Edits   []Edit `json:"edits"`
	Summary string `json:"summary"`
	Message string `json:"message"`
}

// NotesFile is the file the fake model writes and rewrites.
const NotesFile = "NOTES.md"

// Answer is the model: deterministic in the request. A first round
// writes a plan for the prompt into NOTES.md; a reply round rewrites it
// with the reviewer's message.
func Answer(req Request) Response {
	task := firstLine(req.Prompt)
	if !req.Continue {
		return Response{
			Edits:   []Edit{{Path: NotesFile, Content: fmt.Sprintf("# Plan\n\nTask: %s\n\n1. Read the code.\n2. Make the change.\n3. Test it.\n", task)}},
			Summary: fmt.Sprintf("Wrote a plan for %q to %s.\n", task, NotesFile),
			Message: "I wrote a plan to " + NotesFile + ".",
		}
	}
	prev := req.Files[NotesFile]
	return Response{
		Edits:   []Edit{{Path: NotesFile, Content: strings.TrimRight(prev, "\n") + "\n\n## After review\n\n" + strings.TrimSpace(req.Prompt) + "\n"}},
		Summary: "Took the review into account in " + NotesFile + ".\n",
		Message: "I revised " + NotesFile + " after your review.",
	}
}

func firstLine(s string) string {
	for line := range strings.Lines(s) {
		if t := strings.TrimSpace(line); t != "" {
			return t
		}
	}
	return "(no task)"
}

// Server serves the fake model on a loopback port.
type Server struct {
	URL  string // http://127.0.0.1:PORT
	Addr string // 127.0.0.1:PORT
	srv  *http.Server
	mu   sync.Mutex
	reqs []Request
}

// Start listens on 127.0.0.1 (a free port) and serves until Close.
func Start() (*Server, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("fake model: %w", err)
	}
	s := &Server{Addr: ln.Addr().String()}
	s.URL = "http://" + s.Addr
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/edit", func(w http.ResponseWriter, r *http.Request) {
		var req Request
		if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<20)).Decode(&req); err != nil {
			http.Error(w, "bad request: "+err.Error(), http.StatusBadRequest)
			return
		}
		s.mu.Lock()
		s.reqs = append(s.reqs, req)
		s.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(Answer(req))
	})
	s.srv = &http.Server{Handler: mux}
	go s.srv.Serve(ln)
	return s, nil
}

// Requests returns the requests served so far.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request(nil), s.reqs...)
}

// Close stops the server.
func (s *Server) Close() error { return s.srv.Shutdown(context.Background()) }
