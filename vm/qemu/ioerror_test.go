package qemu

import (
	"encoding/json"
	"io"
	"log/slog"
	"os/exec"
	"strings"
	"syscall"
	"testing"
)

// TestFullHostDiskEndsTheMachine: QEMU pauses a guest whose disk write
// found the host's disk full (werror=enospc, its default); the machine is
// then killed with the reason, not left paused for ever. An error QEMU
// only reports (action "report") ends nothing.
func TestFullHostDiskEndsTheMachine(t *testing.T) {
	start := func() *machine {
		cmd := exec.Command("sleep", "60")
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
		return &machine{cmd: cmd, log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	}
	m := start()
	m.event("BLOCK_IO_ERROR", json.RawMessage(`{"device":"","node-name":"disk0","operation":"write","action":"stop","nospace":true,"reason":"No space left on device"}`))
	if err := m.cmd.Wait(); err == nil || !strings.Contains(err.Error(), "killed") {
		t.Errorf("the paused machine's process: %v, want killed", err)
	}
	if !strings.Contains(m.killReason, "the host's disk is full (a write to its disk disk0 found no space)") {
		t.Errorf("kill reason %q", m.killReason)
	}

	m = start()
	m.event("BLOCK_IO_ERROR", json.RawMessage(`{"device":"disk1","operation":"read","action":"report","nospace":false,"reason":"Input/output error"}`))
	if m.killReason != "" || m.cmd.ProcessState != nil {
		t.Errorf("a reported error killed the machine: %q", m.killReason)
	}
}
