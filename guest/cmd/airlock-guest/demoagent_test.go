package main

import (
	"strings"
	"testing"
)

// TestAskTask: without -p the demo agent asks for its task on its
// terminal and takes one line; nothing typed is an error that says what
// to do.
func TestAskTask(t *testing.T) {
	var out strings.Builder
	task, err := askTask(strings.NewReader("  add stop words \nnext line\n"), &out)
	if err != nil || task != "add stop words" {
		t.Errorf("task %q, %v", task, err)
	}
	if !strings.Contains(out.String(), "what should I do?") {
		t.Errorf("asked %q", out.String())
	}
	for _, in := range []string{"", "\n", "   \n"} {
		if _, err := askTask(strings.NewReader(in), &out); err == nil || !strings.Contains(err.Error(), "-p TASK") {
			t.Errorf("input %q: %v", in, err)
		}
	}
}
