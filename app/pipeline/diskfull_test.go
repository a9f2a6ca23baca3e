package pipeline

import (
	"strings"
	"testing"

	"github.com/airlock-dev/airlock/app/sandbox"
)

func TestParseDF(t *testing.T) {
	for _, c := range []struct {
		out  string
		want sandbox.DiskUsage
		ok   bool
	}{
		{"Filesystem     1024-blocks    Used Available Capacity Mounted on\n/dev/vdb          1014680 1014664         0     100% /workspace\n",
			sandbox.DiskUsage{Size: 1014680 << 10, Used: 1014664 << 10}, true},
		{"Filesystem 1024-blocks Used Available Capacity Mounted on\noverlay 8191416 12 7755600 1% /\n", sandbox.DiskUsage{Size: 8191416 << 10, Used: 12 << 10}, true},
		// What a hostile or broken guest may say is not a figure.
		{"", sandbox.DiskUsage{}, false},
		{"Filesystem 1024-blocks Used\n/dev/vdb 10 20 0 100% /workspace\n", sandbox.DiskUsage{}, false}, // used over size
		{"Filesystem 1024-blocks Used\n/dev/vdb -1 0 0 0% /workspace\n", sandbox.DiskUsage{}, false},    // negative
		{"Filesystem x\n/dev/vdb 99999999999999999999 0 0 0% /w\n", sandbox.DiskUsage{}, false},         // overflows
		{"Filesystem x\n/dev/vdb 10 5 5 50% /w\n/dev/vdc 10 5 5 50% /w\n", sandbox.DiskUsage{}, false},  // two lines
		{"Wat\n/dev/vdb 10 5 5 50% /w\n", sandbox.DiskUsage{}, false},
	} {
		dirs := []string{"/workspace"}
		got, ok := parseDF(c.out, dirs)
		var first sandbox.DiskUsage
		if len(got) > 0 {
			first = got[0]
		}
		if ok && c.want.Path == "" {
			c.want.Path = "/workspace"
		}
		if ok != c.ok || first != c.want {
			t.Errorf("parseDF(%q) = %+v, %v; want %+v, %v", c.out, got, ok, c.want, c.ok)
		}
	}
	two := "Filesystem 1024-blocks Used Available Capacity Mounted on\n/dev/vdb 1024 10 1014 1% /workspace\n/dev/vda 2048 2048 0 100% /\n"
	if got, ok := parseDF(two, []string{"/workspace", "/var/lib/docker"}); !ok || len(got) != 2 || got[1] != (sandbox.DiskUsage{Path: "/var/lib/docker", Size: 2 << 20, Used: 2 << 20}) {
		t.Errorf("parseDF of two directories = %+v, %v", got, ok)
	}
	if m := DiskFullMessage(sandbox.DiskUsage{Path: "/var/lib/docker", Size: 1 << 30, Used: 1 << 30}); !strings.Contains(m, "Docker's images") {
		t.Errorf("message: %s", m)
	}
	if m := DiskFullMessage(sandbox.DiskUsage{Size: 1 << 30, Used: 1<<30 - 4<<20}); !strings.Contains(m, "1.0 of 1.0 GiB") || !strings.Contains(m, "--disk") {
		t.Errorf("message: %s", m)
	}
}
