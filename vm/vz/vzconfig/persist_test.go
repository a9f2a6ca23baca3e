package vzconfig

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/airlock-dev/airlock/vm"
)

func TestLoadOrCreate(t *testing.T) {
	path := filepath.Join(t.TempDir(), "id")
	calls := 0
	create := func() ([]byte, error) { calls++; return []byte{1, 2, 3}, nil }
	for i := range 2 {
		got, err := LoadOrCreate(path, create)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, []byte{1, 2, 3}) {
			t.Errorf("run %d: got %v", i, got)
		}
	}
	if calls != 1 {
		t.Errorf("create called %d times, want once", calls)
	}

	empty := filepath.Join(t.TempDir(), "empty")
	os.WriteFile(empty, nil, 0o644)
	if _, err := LoadOrCreate(empty, create); err == nil {
		t.Error("an empty file was accepted")
	}
	if _, err := LoadOrCreate(filepath.Join(t.TempDir(), "x"), func() ([]byte, error) { return nil, nil }); err == nil {
		t.Error("creating empty data was accepted")
	}
	boom := errors.New("boom")
	p := filepath.Join(t.TempDir(), "y")
	if _, err := LoadOrCreate(p, func() ([]byte, error) { return nil, boom }); !errors.Is(err, boom) {
		t.Errorf("got %v, want boom", err)
	}
	if _, err := os.Stat(p); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a failed create left %s behind", p)
	}
}

func TestLoadOrCreateMAC(t *testing.T) {
	path := filepath.Join(t.TempDir(), "mac")
	rnd := bytes.NewReader([]byte{0xff, 0x11, 0x22, 0x33, 0x44, 0x55})
	mac, err := LoadOrCreateMAC(path, rnd)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := mac.String(), "fe:11:22:33:44:55"; got != want {
		t.Errorf("mac %s, want %s (unicast, locally administered)", got, want)
	}
	again, err := LoadOrCreateMAC(path, bytes.NewReader(nil))
	if err != nil || again.String() != mac.String() {
		t.Errorf("reload: %v, %v; want %s", again, err, mac)
	}

	for name, content := range map[string]string{"garbage": "nope\n", "multicast": "01:00:5e:00:00:01\n", "eui64": "02:00:00:00:00:00:00:01\n"} {
		p := filepath.Join(t.TempDir(), name)
		os.WriteFile(p, []byte(content), 0o644)
		if _, err := LoadOrCreateMAC(p, nil); err == nil {
			t.Errorf("%s accepted", name)
		}
	}
}

func TestSaveRestoreIdentity(t *testing.T) {
	saved := vm.Spec{StateDir: t.TempDir()}
	if _, err := LoadOrCreate(MachineIDPath(saved), func() ([]byte, error) { return []byte("id-of-the-saved-machine"), nil }); err != nil {
		t.Fatal(err)
	}
	state := filepath.Join(t.TempDir(), "state")
	if err := SaveIdentity(Config{MachineIDPath: MachineIDPath(saved)}, state); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(state + ".vz-mac"); !os.IsNotExist(err) {
		t.Errorf("a machine without a MAC saved one: %v", err)
	}

	// Another run directory, empty or with another machine's identifier:
	// the saved one is installed.
	for _, other := range []string{"", "id-of-another-machine"} {
		into := vm.Spec{StateDir: t.TempDir()}
		if other != "" {
			os.WriteFile(MachineIDPath(into), []byte(other), 0o600)
		}
		if err := RestoreIdentity(into, state); err != nil {
			t.Fatal(err)
		}
		if b, _ := os.ReadFile(MachineIDPath(into)); string(b) != "id-of-the-saved-machine" {
			t.Errorf("restored identifier %q", b)
		}
	}

	// A state without one restores only where the identifier is.
	bare := filepath.Join(t.TempDir(), "state")
	if err := RestoreIdentity(vm.Spec{StateDir: t.TempDir()}, bare); err == nil {
		t.Error("restore with no identifier anywhere worked")
	}
	if err := RestoreIdentity(saved, bare); err != nil {
		t.Errorf("restore into the saved machine's own directory: %v", err)
	}
}
