package launch_test

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/airlock-dev/airlock/app/machine/launch"
	"github.com/airlock-dev/airlock/testkit/testenv"
	"github.com/airlock-dev/airlock/vm"
	"github.com/airlock-dev/airlock/vm/qemu"
)

// BenchmarkWarmStart compares a cold boot to ready (first contact done,
// workspace disk mounted) with a restore of the warm snapshot to ready, on
// the same image and machine, and prints the ratio. scripts/bench-warm
// runs it.
func BenchmarkWarmStart(b *testing.B) {
	testenv.Image(b, vm.AMD64)
	home := testenv.Home(b)
	mem := 0
	if s := os.Getenv("AIRLOCK_BENCH_MEMORY_MIB"); s != "" {
		var err error
		if mem, err = atoiEnv(s); err != nil {
			b.Fatal(err)
		}
	}
	var logger *slog.Logger
	if os.Getenv("AIRLOCK_BENCH_DEBUG") != "" {
		logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	be := backend(&testing.T{}, home)
	if logger != nil {
		be = qemu.New(qemu.Config{CacheDir: filepath.Join(home, "cache", "qemu"), Logger: logger})
	}
	disk := workspaceDisk(&testing.T{}, 1<<30)
	boot := func(b *testing.B, warm bool) time.Duration {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		g, err := launch.Boot(ctx, launch.Options{Home: home, Arch: vm.AMD64, Backend: be,
			MemoryMiB: mem, Warm: warm, Logger: logger, Disks: []launch.Disk{{Path: disk, Mount: "/workspace"}}})
		if err != nil {
			b.Fatal(err)
		}
		if g.Warm != warm {
			b.Fatalf("warm = %v, want %v", g.Warm, warm)
		}
		d := g.BootTime
		g.Kill()
		return d
	}
	// The snapshot is saved (once) before anything is timed.
	boot(b, false)
	ctx, cancel := context.WithCancel(context.Background())
	g, err := launch.Boot(ctx, launch.Options{Home: home, Arch: vm.AMD64, Backend: be,
		MemoryMiB: mem, Warm: true, Disks: []launch.Disk{{Path: disk, Mount: "/workspace"}}})
	if err != nil {
		b.Fatal(err)
	}
	g.Kill()
	cancel()

	var cold, warm time.Duration
	var nCold, nWarm int
	b.Run("cold", func(b *testing.B) {
		for b.Loop() {
			cold += boot(b, false)
			nCold++
		}
	})
	b.Run("warm", func(b *testing.B) {
		for b.Loop() {
			warm += boot(b, true)
			nWarm++
		}
	})
	if nCold > 0 && nWarm > 0 {
		c, w := cold/time.Duration(nCold), warm/time.Duration(nWarm)
		b.Logf("boot to ready: cold %s (n=%d), warm restore %s (n=%d), ratio %.2f",
			c.Round(time.Millisecond), nCold, w.Round(time.Millisecond), nWarm, float64(w)/float64(c))
	}
}

func atoiEnv(s string) (int, error) { return strconv.Atoi(s) }
