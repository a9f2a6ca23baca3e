package qemu

import (
	"bytes"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/airlock-dev/airlock/testkit/testenv"
	"github.com/airlock-dev/airlock/vm"
)

// The attack: the guest prints without end on its console to fill the
// host's disk. The console log keeps its first and last bytes, and a boot
// error still shows the last lines.
func TestConsoleLogIsCapped(t *testing.T) {
	path := filepath.Join(t.TempDir(), "console.log")
	c, w, err := openConsole(path, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	go c.copy()
	// QEMU's side: 64 MiB of console, in big writes.
	w.Write([]byte("FIRST boot line\n"))
	chunk := bytes.Repeat([]byte("[ 1.000000] the guest prints and prints\n"), 1<<14)
	for n := 0; n < 64<<20; n += len(chunk) {
		if _, err := w.Write(chunk); err != nil {
			t.Fatal(err)
		}
	}
	w.Write([]byte("Kernel panic - not syncing: LAST words\n"))
	w.Close() // QEMU exits
	c.finish()

	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(data) > consoleHead+consoleTail+200 {
		t.Errorf("the console log is %d bytes, over the cap of %d + the marker", len(data), consoleHead+consoleTail)
	}
	if !bytes.HasPrefix(data, []byte("FIRST boot line\n")) {
		t.Errorf("the console log does not start with the boot: %q", data[:min(len(data), 40)])
	}
	if !bytes.Contains(data, []byte("bytes of output left out here; the console log keeps the first 4.0 MiB and the last 4.0 MiB]\n")) {
		t.Error("the console log has no marker where it was cut")
	}
	if got := vm.TailConsole(path, 1); len(got) != 1 || got[0] != "Kernel panic - not syncing: LAST words" {
		t.Errorf("the last console line is %q: a boot error would not show what the guest last said", got)
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("console log mode %v (%v), want 0600", fi.Mode(), err)
	}
}

// QEMU accepts the console chardev Args writes, a pipe inherited as fd
// consoleFD, and what it prints there reaches the console log. No guest
// boots: the chardev carries a monitor, whose banner is the output.
func TestConsolePipeReachesQEMU(t *testing.T) {
	prog, err := exec.LookPath("qemu-system-x86_64")
	if err != nil {
		testenv.Skip(t, testenv.QEMU, err.Error())
	}
	args, err := Args(vm.Spec{Kernel: "/k", StateDir: t.TempDir()}.WithDefaults(vm.AMD64), Host{Accel: TCG, Arch: vm.AMD64, OS: "linux"})
	if err != nil {
		t.Fatal(err)
	}
	var chardev string
	for i, a := range args {
		if a == "-chardev" && strings.HasPrefix(args[i+1], "file,id=console,") {
			chardev = args[i+1]
		}
	}
	path := filepath.Join(t.TempDir(), "console.log")
	c, w, err := openConsole(path, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(prog, "-machine", "none", "-nodefaults", "-display", "none", "-monitor", "stdio",
		"-chardev", chardev, "-mon", "chardev=console,mode=readline")
	cmd.Stdin = strings.NewReader("quit\n")
	cmd.ExtraFiles = []*os.File{nil, nil, w} // fd 5 = consoleFD
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		c.abort()
		t.Fatal(err)
	}
	w.Close()
	go c.copy()
	if err := cmd.Wait(); err != nil {
		t.Fatalf("qemu: %v\n%s", err, out.Bytes())
	}
	c.finish()
	if data, _ := os.ReadFile(path); !bytes.Contains(data, []byte("monitor")) {
		t.Errorf("the console log holds %q, want QEMU's monitor banner (qemu said %q)", data, out.Bytes())
	}
}
