package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// maxTask caps a task typed into the demo agent's session.
const maxTask = 64 << 10

// askTask asks for the task on out and reads one line of it from in.
func askTask(in io.Reader, out io.Writer) (string, error) {
	fmt.Fprint(out, "demo-agent: what should I do? ")
	line, err := bufio.NewReader(io.LimitReader(in, maxTask)).ReadString('\n')
	task := strings.TrimSpace(line)
	if task == "" {
		if err != nil && !errors.Is(err, io.EOF) {
			return "", fmt.Errorf("read the task: %w", err)
		}
		return "", errors.New("demo-agent: no task given (type one, or run it with -p TASK)")
	}
	return task, nil
}

// demoAgent is Airlock's stand-in for an AI coding agent (the demo
// preset, /init demo-agent): it sends the prompt to a model API at
// $AIRLOCK_DEMO_API, always through the proxy in $HTTP_PROXY (the only
// way out of the VM, even to an address NO_PROXY names), makes the
// whole-file edits the model answers with in the working directory,
// writes the model's summary to .airlock/summary.md and prints
// {"result": message} as its final output. Its wire format is
// app/agent/fakemodel's.
func demoAgent(args []string) error {
	fs := flag.NewFlagSet("demo-agent", flag.ContinueOnError)
	prompt := fs.String("p", "", "the task")
	cont := fs.Bool("continue", false, "continue the previous round")
	if err := fs.Parse(args); err != nil {
		return err
	}
	api := os.Getenv("AIRLOCK_DEMO_API")
	if api == "" {
		return errors.New("demo-agent needs AIRLOCK_DEMO_API (airlock run --agent demo sets it)")
	}
	if *prompt == "" {
		// Without -p it is interactive, as a real agent's session is:
		// it asks for the task on its terminal.
		task, err := askTask(os.Stdin, os.Stdout)
		if err != nil {
			return err
		}
		*prompt = task
	}
	// Like a real agent, it keeps its conversation in its home: on the
	// full image that is the sandbox's own root disk, which the next round
	// boots again.
	rounds := conversation(*prompt)
	if *cont {
		fmt.Fprintf(os.Stderr, "demo-agent: continuing a conversation of %d earlier rounds\n", rounds)
	}
	req := map[string]any{"prompt": *prompt, "continue": *cont}
	if data, err := os.ReadFile("NOTES.md"); err == nil && len(data) < 1<<20 {
		req["files"] = map[string]string{"NOTES.md": string(data)}
	}
	body, _ := json.Marshal(req)
	tr := &http.Transport{}
	if p := os.Getenv("HTTP_PROXY"); p != "" {
		u, err := url.Parse(p)
		if err != nil {
			return fmt.Errorf("HTTP_PROXY: %w", err)
		}
		tr.Proxy = http.ProxyURL(u)
	}
	client := &http.Client{Transport: tr, Timeout: time.Minute}
	fmt.Fprintln(os.Stderr, "demo-agent: asking the model")
	resp, err := client.Post(strings.TrimRight(api, "/")+"/v1/edit", "application/json", bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("model API: %w", err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("model API: %s: %s", resp.Status, strings.TrimSpace(string(data)))
	}
	var ans struct {
		Edits []struct {
			Path    string `json:"path"`
			Content string `json:"content"`
		} `json:"edits"`
		Summary string `json:"summary"`
		Message string `json:"message"`
	}
	if err := json.Unmarshal(data, &ans); err != nil {
		return fmt.Errorf("model API answer: %w", err)
	}
	for _, e := range ans.Edits {
		if !filepath.IsLocal(e.Path) {
			return fmt.Errorf("the model asked to write outside the workspace: %q", e.Path)
		}
		if dir := filepath.Dir(e.Path); dir != "." {
			if err := os.MkdirAll(dir, 0o755); err != nil {
				return err
			}
		}
		if err := os.WriteFile(e.Path, []byte(e.Content), 0o644); err != nil {
			return err
		}
		fmt.Fprintln(os.Stderr, "demo-agent: wrote", e.Path)
	}
	if err := os.MkdirAll(".airlock", 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(".airlock/summary.md", []byte(ans.Summary), 0o644); err != nil {
		return err
	}
	out, _ := json.Marshal(map[string]string{"result": ans.Message})
	fmt.Println(string(out))
	return nil
}

// conversation appends prompt to $HOME/.airlock-demo/conversation and
// returns how many prompts were there before. Without a usable home it is
// 0.
func conversation(prompt string) int {
	home := os.Getenv("HOME")
	if home == "" {
		return 0
	}
	dir := filepath.Join(home, ".airlock-demo")
	file := filepath.Join(dir, "conversation")
	old, _ := os.ReadFile(file)
	n := bytes.Count(old, []byte("\n"))
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return n
	}
	line, _ := json.Marshal(prompt)
	f, err := os.OpenFile(file, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return n
	}
	defer f.Close()
	_, _ = f.Write(append(line, '\n'))
	return n
}
