package agent

import (
	"bytes"
	"log/slog"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestCmdlineHas(t *testing.T) {
	tests := []struct {
		cmdline string
		want    bool
	}{
		{"console=hvc0 airlock.probe quiet", true},
		{"airlock.probe\n", true},
		{"console=hvc0 airlock.probe=0", false},
		{"xairlock.probe", false},
		{"", false},
	}
	for _, tt := range tests {
		if got := cmdlineHas(tt.cmdline, ProbeArg); got != tt.want {
			t.Errorf("cmdlineHas(%q) = %v, want %v", tt.cmdline, got, tt.want)
		}
	}
}

func TestLookupSerialPort(t *testing.T) {
	sys := t.TempDir()
	for port, name := range map[string]string{"vport0p1": "org.qemu.guest_agent.0", "vport1p2": "airlock.link\n", "vport1p3": ""} {
		if err := os.MkdirAll(filepath.Join(sys, port), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(sys, port, "name"), []byte(name), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if got := lookupSerialPort(sys, "airlock.link"); got != "/dev/vport1p2" {
		t.Errorf("lookupSerialPort = %q, want /dev/vport1p2", got)
	}
	if got := lookupSerialPort(sys, "other"); got != "" {
		t.Errorf("lookupSerialPort(other) = %q, want none", got)
	}
}

func TestLoadModulesMissing(t *testing.T) {
	dir := t.TempDir()
	var logs bytes.Buffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
	if n, err := loadModules(filepath.Join(dir, "absent"), log); n != 0 || err != nil {
		t.Errorf("loadModules(no list) = %d, %v; want 0, nil", n, err)
	}
	list := filepath.Join(dir, "modules.order")
	if err := os.WriteFile(list, []byte("# comment\n\n"+dir+"/a.ko\n"+dir+"/b.ko.zst\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	n, err := loadModules(list, log)
	if n != 0 || err != nil {
		t.Errorf("loadModules = %d, %v; want 0, nil", n, err)
	}
	if got := bytes.Count(logs.Bytes(), []byte("load module")); got != 2 {
		t.Errorf("logged %d module failures, want 2:\n%s", got, logs.String())
	}
}

func TestConsoleLogger(t *testing.T) {
	var buf bytes.Buffer
	log := ConsoleLogger(&buf, slog.LevelInfo)
	log.Info("serving link", "vsock_port", 1024)
	log.Warn("mount", "err", "busy")
	log.Debug("hidden")
	want := "airlock-guest: msg=\"serving link\" vsock_port=1024\nairlock-guest: level=WARN msg=mount err=busy\n"
	if diff := cmp.Diff(want, buf.String()); diff != "" {
		t.Errorf("console (-want +got):\n%s", diff)
	}
}
