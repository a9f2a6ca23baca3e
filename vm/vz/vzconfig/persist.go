package vzconfig

import (
	"bytes"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"

	"github.com/airlock-dev/airlock/internal/atomicfile"
	"github.com/airlock-dev/airlock/vm"
)

// LoadOrCreate returns the contents of the file at path, first creating it
// with the bytes create returns when it does not exist. The file is written
// atomically, so a crash never leaves a half-written one. An empty file is
// an error: vz.NewGenericMachineIdentifierWithData panics on empty data.
func LoadOrCreate(path string, create func() ([]byte, error)) ([]byte, error) {
	data, err := os.ReadFile(path)
	if err == nil {
		if len(data) == 0 {
			return nil, fmt.Errorf("read %s: the file is empty; delete it to make a new one", path)
		}
		return data, nil
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	data, err = create()
	if err != nil {
		return nil, fmt.Errorf("create %s: %w", path, err)
	}
	if len(data) == 0 {
		return nil, fmt.Errorf("create %s: nothing to write", path)
	}
	if err := atomicfile.WriteFile(path, data, 0o600); err != nil {
		return nil, fmt.Errorf("create %s: %w", path, err)
	}
	return data, nil
}

// LoadOrCreateMAC returns the MAC address persisted at path, creating a
// random locally administered unicast one (from random; nil means
// crypto/rand) the first time. A persisted MAC keeps the guest's DHCP
// lease: random MACs on every start exhaust vz's NAT address pool.
func LoadOrCreateMAC(path string, random io.Reader) (net.HardwareAddr, error) {
	if random == nil {
		random = rand.Reader
	}
	data, err := LoadOrCreate(path, func() ([]byte, error) {
		b := make([]byte, 6)
		if _, err := io.ReadFull(random, b); err != nil {
			return nil, err
		}
		b[0] = b[0]&^0x01 | 0x02 // unicast, locally administered
		return []byte(net.HardwareAddr(b).String() + "\n"), nil
	})
	if err != nil {
		return nil, err
	}
	mac, err := net.ParseMAC(string(bytes.TrimSpace(data)))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w; delete it to make a new one", path, err)
	}
	if len(mac) != 6 || mac[0]&0x01 != 0 {
		return nil, fmt.Errorf("read %s: %s is not a unicast Ethernet address; delete the file to make a new one", path, mac)
	}
	return mac, nil
}

// A saved state restores only into a machine with the saved machine's
// identifier (and, with NAT, its MAC). Save keeps copies of them next to
// the state file (SavedIdentityFiles), so that the state can be restored
// into another state directory: a warm snapshot restored for each
// sandbox, a checkpoint restored after its run directory was replaced.

// savedIdentityFiles are the files next to state file path that hold the
// saved machine's persisted identity, each with the file of spec's state
// directory it stands for.
func savedIdentityFiles(spec vm.Spec, path string) map[string]string {
	return map[string]string{
		path + "." + machineIDName: MachineIDPath(spec),
		path + "." + macName:       MACPath(spec),
	}
}

// SaveIdentity copies the persisted identity of the machine configured as
// c (its identifier, and its MAC when it has one) next to the state file
// path.
func SaveIdentity(c Config, path string) error {
	for name, live := range map[string]string{machineIDName: c.MachineIDPath, macName: c.MACPath} {
		if live == "" {
			continue
		}
		data, err := os.ReadFile(live)
		if err != nil {
			return fmt.Errorf("keep the machine's identity with its state: %w", err)
		}
		if err := atomicfile.WriteFile(path+"."+name, data, 0o600); err != nil {
			return fmt.Errorf("keep the machine's identity with its state: %w", err)
		}
	}
	return nil
}

// RestoreIdentity installs the identity saved next to state file path
// into spec's state directory, replacing what is there: the machine
// restored from path is the saved one. A state saved without it (before
// Airlock kept it) needs the state directory to hold the saved machine's
// identifier already.
func RestoreIdentity(spec vm.Spec, path string) error {
	for saved, live := range savedIdentityFiles(spec, path) {
		data, err := os.ReadFile(saved)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return fmt.Errorf("restore the machine's identity: %w", err)
		}
		if len(data) == 0 {
			return fmt.Errorf("restore the machine's identity: %s is empty", saved)
		}
		if err := atomicfile.WriteFile(live, data, 0o600); err != nil {
			return fmt.Errorf("restore the machine's identity: %w", err)
		}
	}
	if _, err := os.Stat(MachineIDPath(spec)); err != nil {
		return fmt.Errorf("no machine identifier saved with %s nor in %s (%w): restore with the state dir of the machine that was saved", path, spec.StateDir, err)
	}
	return nil
}
