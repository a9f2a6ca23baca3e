package vmhost

import (
	"context"
	"errors"
	"os/exec"
	"strings"
	"testing"
	"time"
)

func TestSpawnReportsAnEarlyExit(t *testing.T) {
	dir := t.TempDir()
	_, _, err := Spawn(t.Context(), dir, exec.Command("sh", "-c", "echo 'start qemu VM: qemu-system-x86_64 not found' >&2; exit 125"))
	if err == nil || !strings.Contains(err.Error(), "qemu-system-x86_64 not found") || !strings.Contains(err.Error(), LogFile) {
		t.Errorf("Spawn of a supervisor that exits at once: %v, want its last log line and the log's path", err)
	}
}

func TestSpawnReadsTheReadyLine(t *testing.T) {
	dir := t.TempDir()
	// The supervisor's side of the pipe: the descriptor named by the
	// environment variable.
	c, st, err := Spawn(t.Context(), dir, exec.Command("sh", "-c", `echo '{"name":"x","state":"running","link":"serial"}' >&$`+ReadyFDEnv))
	if err != nil {
		t.Fatal(err)
	}
	if st.Name != "x" || st.Link != "serial" || c.Dir() != dir {
		t.Errorf("ready status %+v, dir %s", st, c.Dir())
	}
}

func TestSpawnKilledWhenContextEnds(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
	defer cancel()
	_, _, err := Spawn(ctx, t.TempDir(), exec.Command("sleep", "60"))
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Spawn when ctx ends first: %v", err)
	}
}
