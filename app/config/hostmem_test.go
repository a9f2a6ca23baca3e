package config

import (
	"strings"
	"testing"
)

// TestResolveHostMemory: memory is limited by the host's only: 8 GiB on
// a host of 16 is given (no 4 GiB cap anywhere), more than the host has
// is refused with a sentence saying so, from a flag or the user's file;
// a project file asking for more than the user allows is ignored as
// before.
func TestResolveHostMemory(t *testing.T) {
	host := int64(16 * GiB)
	eff, err := Resolve(Sources{Flags: Limits{Memory: 8 * GiB}, HostMemory: host})
	if err != nil || eff.Limits.Memory != 8*GiB {
		t.Fatalf("8G on a 16G host: %+v %v", eff.Limits, err)
	}
	if eff.Limits.Memory.MiB() != 8192 {
		t.Errorf("8G is %d MiB", eff.Limits.Memory.MiB())
	}
	eff, err = Resolve(Sources{Flags: Limits{Memory: 16 * GiB}, HostMemory: host})
	if err != nil || eff.Limits.Memory != 16*GiB {
		t.Errorf("all of the host's memory: %+v %v", eff.Limits, err)
	}
	for _, s := range []Sources{
		{Flags: Limits{Memory: 17 * GiB}, HostMemory: host},
		{User: User{Limits: Limits{Memory: 64 * GiB}}, HostMemory: host},
	} {
		_, err := Resolve(s)
		if err == nil || !strings.Contains(err.Error(), "is more than this host has (16.0G)") {
			t.Errorf("past the host's memory: %v", err)
		}
	}
	eff, err = Resolve(Sources{Project: Project{Limits: Limits{Memory: 64 * GiB}}, HostMemory: host})
	if err != nil || eff.Limits.Memory != DefaultLimits().Memory {
		t.Errorf("a project asking for more: %+v %v", eff.Limits, err)
	}
	// Without the host's size, nothing is checked.
	if _, err := Resolve(Sources{Flags: Limits{Memory: 1 << 40}}); err != nil {
		t.Error(err)
	}
}
