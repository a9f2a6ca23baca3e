package cli

import (
	"testing"

	"github.com/airlock-dev/airlock/app/config"
	"github.com/airlock-dev/airlock/sync/manifest"
)

func TestMemoryFlag(t *testing.T) {
	for in, want := range map[string]config.Size{"2048": 2 * config.GiB, "2G": 2 * config.GiB, "512M": 512 * config.MiB, "1.5g": 1536 * config.MiB} {
		var m memoryFlag
		if err := m.Set(in); err != nil || m.Size != want {
			t.Errorf("--memory %s = %v, %v; want %v", in, m.Size, err, want)
		}
	}
	var m memoryFlag
	if err := m.Set("lots"); err == nil {
		t.Error("--memory lots: no error")
	}
}

func TestManifestLimits(t *testing.T) {
	l := config.DefaultLimits()
	l.MaxPullBytes, l.MaxFiles = config.Unlimited, 10
	got := manifestLimits(l)
	want := manifest.Limits{MaxTotalBytes: -1, MaxEntries: 10, MaxFileSize: 1 << 30}
	if got != want {
		t.Errorf("manifestLimits = %+v, want %+v", got, want)
	}
}
