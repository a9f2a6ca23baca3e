package launch_test

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/airlock-dev/airlock/app/machine/launch"
	"github.com/airlock-dev/airlock/app/machine/vmhost"
	"github.com/airlock-dev/airlock/vm"
)

// TestSupervisedWithoutSupervisor: a run directory no supervisor serves
// has no machine to reach, and none to kill.
func TestSupervisedWithoutSupervisor(t *testing.T) {
	dir := t.TempDir()
	if _, err := launch.DialSupervised(context.Background(), dir); !errors.Is(err, vmhost.ErrNoSupervisor) {
		t.Errorf("DialSupervised: %v, want ErrNoSupervisor", err)
	}
	if err := launch.Kill(context.Background(), dir); err != nil {
		t.Errorf("Kill: %v, want nothing to kill", err)
	}
}

func TestReadSpec(t *testing.T) {
	dir := t.TempDir()
	if _, err := launch.ReadSpec(dir); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("no spec: %v, want fs.ErrNotExist", err)
	} else if _, ok := errors.AsType[*fs.PathError](err); !ok {
		t.Errorf("no spec: %T, want an *fs.PathError", err)
	}
	path := filepath.Join(dir, vmhost.SpecFile)
	if err := os.WriteFile(path, []byte("{"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := launch.ReadSpec(dir); err == nil {
		t.Error("a broken spec was read")
	} else if _, ok := errors.AsType[*fs.PathError](err); ok {
		t.Errorf("a broken spec reads as a missing one: %v", err)
	}
	want := vm.Spec{Name: "x", CPUs: 2, Disks: []vm.Disk{{Path: "/run/disk.img"}}}
	if err := os.WriteFile(path, []byte(`{"name": "x", "cpus": 2, "disks": [{"path": "/run/disk.img"}]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	got, err := launch.ReadSpec(dir)
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("spec (-want +got):\n%s", d)
	}
}
