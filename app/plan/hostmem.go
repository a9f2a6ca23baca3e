//go:build !darwin

package plan

import (
	"fmt"
	"os"
	"strings"
)

// HostMemory is the host's memory in bytes (MemTotal of /proc/meminfo);
// 0 when it cannot tell.
func HostMemory() int64 {
	data, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return 0
	}
	for line := range strings.Lines(string(data)) {
		var kb int64
		if _, err := fmt.Sscanf(line, "MemTotal: %d kB", &kb); err == nil {
			return kb * 1024
		}
	}
	return 0
}
