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
