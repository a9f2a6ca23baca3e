package agent

import (
	"bytes"
	"log/slog"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/airlock-dev/airlock/guest"
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
		if got := cmdlineHas(tt.cmdline, guest.ProbeArg); got != tt.want {
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
	if paths, err := readModuleList(filepath.Join(dir, "absent")); len(paths) != 0 || err != nil {
		t.Errorf("readModuleList(no list) = %v, %v; want none, nil", paths, err)
	}
	list := filepath.Join(dir, "modules.order")
	if err := os.WriteFile(list, []byte("# comment\n\n"+dir+"/a.ko\n"+dir+"/b.ko.zst\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	paths, err := readModuleList(list)
	if err != nil || len(paths) != 2 {
		t.Fatalf("readModuleList = %v, %v; want two paths", paths, err)
	}
	noDevices := func() map[uint32]bool { return nil }
	if n := loadModules(paths, noDevices, log); n != 0 {
		t.Errorf("loadModules = %d; want 0", n)
	}
	if got := bytes.Count(logs.Bytes(), []byte("load module")); got != 2 {
		t.Errorf("logged %d module failures, want 2:\n%s", got, logs.String())
	}
}

func TestModuleSelection(t *testing.T) {
	paths := []string{"/m/virtio_ring.ko", "/m/virtio_pci.ko", "/m/virtio_console.ko", "/m/virtio_blk.ko",
		"/m/vsock.ko", "/m/vmw_vsock_virtio_transport.ko", "/m/virtio-rng.ko", "/m/fuse.ko", "/m/evdev.ko", "/m/button.ko"}
	now, later := splitModules(paths, deferredModules)
	if diff := cmp.Diff([]string{"/m/virtio-rng.ko", "/m/evdev.ko", "/m/button.ko"}, later); diff != "" {
		t.Errorf("deferred (-want +got):\n%s", diff)
	}
	// Only a console device: blk, vsock and fuse are skipped; they fail to
	// load here (no such files), which the log shows, so count attempts.
	var logs bytes.Buffer
	log := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	asked := 0
	devices := func() map[uint32]bool { asked++; return map[uint32]bool{3: true} }
	loadModules(now, devices, log)
	if asked != 1 {
		t.Errorf("devices asked %d times, want once", asked)
	}
	for _, skipped := range []string{"virtio_blk", "vsock", "vmw_vsock_virtio_transport", "fuse"} {
		if !bytes.Contains(logs.Bytes(), []byte("module skipped: no such device\" module="+skipped+" ")) {
			t.Errorf("%s not skipped:\n%s", skipped, logs.String())
		}
	}
	if got := bytes.Count(logs.Bytes(), []byte("load module")); got != 3 {
		t.Errorf("tried %d modules, want 3 (ring, pci, console):\n%s", got, logs.String())
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
