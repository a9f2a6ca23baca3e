package launch

import (
	"slices"
	"testing"

	"github.com/airlock-dev/airlock/guest/client"
	"github.com/airlock-dev/airlock/vm"
)

type emulatedMachine struct {
	vm.Machine
	emulated bool
}

func (m emulatedMachine) Emulated() bool { return m.emulated }

// An emulated guest's link prefers ChaCha20-Poly1305; any other keeps
// x/crypto's defaults.
func TestCiphersFor(t *testing.T) {
	if got := ciphersFor(emulatedMachine{emulated: true}); !slices.Equal(got, client.EmulatedCiphers) {
		t.Errorf("emulated: %v", got)
	}
	if got := ciphersFor(emulatedMachine{}); got != nil {
		t.Errorf("not emulated: %v", got)
	}
	if got := ciphersFor(nil); got != nil {
		t.Errorf("no Emulator: %v", got)
	}
}
