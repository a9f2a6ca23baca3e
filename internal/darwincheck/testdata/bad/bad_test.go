//go:build darwin

package bad

import (
	"testing"

	"github.com/Code-Hex/vz/v3"
)

func TestMisuse(t *testing.T) {
	var v *vz.VirtualMachine
	v.Stop(true) // Stop takes no arguments
}
