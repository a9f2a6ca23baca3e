package vzconfig

import (
	"fmt"
	"strconv"
	"strings"
)

// OSVersion is a macOS version (kern.osproductversion).
type OSVersion struct {
	Major, Minor, Patch int
}

// The macOS versions Airlock's vz backend relies on.
var (
	// MinMacOS runs machines: the generic machine identifier (persisted,
	// so saved state can be restored) arrived in macOS 13.
	MinMacOS = OSVersion{Major: 13}
	// SaveMacOS saves machine state. Below it the framework raises an
	// Objective-C exception that ends the process, so check first.
	SaveMacOS = OSVersion{Major: 14}
)

// ParseOSVersion parses "14", "14.2" or "14.2.1".
func ParseOSVersion(s string) (OSVersion, error) {
	parts := strings.Split(strings.TrimSpace(s), ".")
	if len(parts) > 3 {
		return OSVersion{}, fmt.Errorf("parse macOS version %q: too many parts", s)
	}
	var n [3]int
	for i, p := range parts {
		v, err := strconv.Atoi(p)
		if err != nil || v < 0 {
			return OSVersion{}, fmt.Errorf("parse macOS version %q: %q is not a number", s, p)
		}
		n[i] = v
	}
	return OSVersion{n[0], n[1], n[2]}, nil
}

// AtLeast reports whether v is w or newer.
func (v OSVersion) AtLeast(w OSVersion) bool {
	if v.Major != w.Major {
		return v.Major > w.Major
	}
	if v.Minor != w.Minor {
		return v.Minor > w.Minor
	}
	return v.Patch >= w.Patch
}

func (v OSVersion) String() string {
	if v.Patch != 0 {
		return fmt.Sprintf("%d.%d.%d", v.Major, v.Minor, v.Patch)
	}
	return fmt.Sprintf("%d.%d", v.Major, v.Minor)
}
