package main

import (
	"bytes"
	"go/build/constraint"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func checkOK(t *testing.T, o Options) Result {
	t.Helper()
	if o.GOOS == "" {
		o.GOOS = "darwin"
	}
	r, err := check(o)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestRejectsMisusedVz(t *testing.T) {
	t.Parallel()
	r := checkOK(t, Options{GOARCH: "arm64", Tests: true, Patterns: []string{"./testdata/bad"}})
	wants := []string{
		"bad.go:11:55: cannot use mem (variable of type int64) as uint64 value in argument to vz.NewVirtualMachineConfiguration",
		"bad.go:16:3: cannot use vz.DiskImageSynchronizationModeFsync",
		"bad.go:16:41: cannot use vz.DiskImageCachingModeCached",
		"bad.go:25:8: assignment mismatch: 1 variable but v.RequestStop returns 2 values",
		"bad.go:27:11: v.SaveMachineStateToFile undefined",
		"bad_test.go:13:9: too many arguments in call to v.Stop",
	}
	for _, w := range wants {
		if !slices.ContainsFunc(r.Errors, func(e string) bool { return strings.Contains(e, w) }) {
			t.Errorf("no error containing %q", w)
		}
	}
	if len(r.Errors) != len(wants) {
		t.Errorf("got %d errors, want %d (each once, though the package is checked twice with -test):\n%s",
			len(r.Errors), len(wants), strings.Join(r.Errors, "\n"))
	}
	if r.Ignored != 0 {
		t.Logf("%d errors in dependencies ignored", r.Ignored)
	}
}

func TestTestFilesOnlyWithTests(t *testing.T) {
	t.Parallel()
	r := checkOK(t, Options{GOARCH: "arm64", Patterns: []string{"./testdata/bad"}})
	for _, e := range r.Errors {
		if strings.Contains(e, "_test.go") {
			t.Errorf("test file checked without Tests: %s", e)
		}
	}
	if len(r.Errors) == 0 {
		t.Error("no errors")
	}
}

func TestArm64OnlyAPI(t *testing.T) {
	t.Parallel()
	if r := checkOK(t, Options{GOARCH: "arm64", Patterns: []string{"./testdata/arm64only"}}); len(r.Errors) != 0 {
		t.Errorf("arm64: %q", r.Errors)
	}
	r := checkOK(t, Options{GOARCH: "amd64", Patterns: []string{"./testdata/arm64only"}})
	if len(r.Errors) != 1 || !strings.Contains(r.Errors[0], "v.SaveMachineStateToPath undefined") {
		t.Errorf("amd64: got %q, want SaveMachineStateToPath undefined", r.Errors)
	}
}

// TestAcceptsOurMacCode checks the real macOS backend and the CLI that
// picks it, with their tests, for both Mac architectures.
func TestAcceptsOurMacCode(t *testing.T) {
	t.Parallel()
	for _, arch := range []string{"arm64", "amd64"} {
		t.Run(arch, func(t *testing.T) {
			t.Parallel()
			r := checkOK(t, Options{GOARCH: arch, Tests: true, Patterns: []string{"../../vm/vz/...", "../../app/cli"}})
			if len(r.Errors) != 0 {
				t.Errorf("errors:\n%s", strings.Join(r.Errors, "\n"))
			}
			if r.Checked < 3 {
				t.Errorf("checked %d of our packages, want vm/vz, vm/vz/vzconfig, app/cli at least", r.Checked)
			}
		})
	}
}

func TestRun(t *testing.T) {
	t.Parallel()
	tests := []struct {
		args   []string
		status int
		out    string
	}{
		{[]string{"-goarch", "arm64", "./testdata/arm64only"}, 0, "darwincheck: ok (darwin/arm64, 1 of our packages, cgo faked)"},
		{[]string{"./testdata/arm64only"}, 1, "darwincheck: 1 errors (darwin/amd64, cgo faked)"},
		{[]string{"-goarch", "arm64", "./testdata/bad"}, 1, "darwincheck: 5 errors (darwin/arm64, cgo faked)"},
		{[]string{"-goarch", "arm64", "./testdata/..."}, 2, "no package of this module matched"}, // ... skips testdata
		{[]string{"-nope"}, 2, "flag provided but not defined"},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			t.Parallel()
			var out bytes.Buffer
			if got := run(tt.args, &out, &out); got != tt.status {
				t.Errorf("status %d, want %d; output:\n%s", got, tt.status, &out)
			}
			if !strings.Contains(out.String(), tt.out) {
				t.Errorf("output lacks %q:\n%s", tt.out, &out)
			}
		})
	}
}

// TestVzFilesAreMacOnly checks the build constraints that keep vm/vz out of
// every build but a darwin one with cgo (vz cannot compile anywhere else),
// and vz's arm64-only APIs (save, restore, Rosetta) out of darwin/amd64.
func TestVzFilesAreMacOnly(t *testing.T) {
	t.Parallel()
	files, err := filepath.Glob("../../vm/vz/*.go")
	if err != nil || len(files) == 0 {
		t.Fatalf("no vm/vz files: %v", err)
	}
	builds := func(expr constraint.Expr, tags ...string) bool {
		return expr.Eval(func(tag string) bool { return slices.Contains(tags, tag) })
	}
	for _, f := range files {
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var expr constraint.Expr
		for _, line := range strings.Split(string(src), "\n") {
			if constraint.IsGoBuild(line) {
				if expr, err = constraint.Parse(line); err != nil {
					t.Fatalf("%s: %v", f, err)
				}
				break
			}
		}
		name := filepath.Base(f)
		if expr == nil {
			t.Errorf("%s has no //go:build line", name)
			continue
		}
		for _, other := range [][]string{{"linux", "cgo", "amd64"}, {"linux", "arm64"}, {"darwin", "arm64"}, {"darwin", "amd64"}, {"windows", "cgo", "amd64"}} {
			if builds(expr, other...) {
				t.Errorf("%s builds for %v", name, other)
			}
		}
		arm64, amd64 := builds(expr, "darwin", "cgo", "arm64"), builds(expr, "darwin", "cgo", "amd64")
		// x_arm64.go uses arm64-only vz APIs (save/restore, Rosetta);
		// x_other.go beside it is the Intel stub.
		prefix, _, _ := strings.Cut(name, "_")
		switch {
		case strings.HasSuffix(name, "_arm64.go"):
			if !arm64 || amd64 {
				t.Errorf("%s: builds for darwin/arm64 %v, darwin/amd64 %v; want arm64 only", name, arm64, amd64)
			}
		case strings.HasSuffix(name, "_other.go") && slices.Contains(files, filepath.Join(filepath.Dir(f), prefix+"_arm64.go")):
			if arm64 || !amd64 {
				t.Errorf("%s: builds for darwin/arm64 %v, darwin/amd64 %v; want the amd64 stub only", name, arm64, amd64)
			}
		case !arm64 || !amd64:
			t.Errorf("%s: builds for darwin/arm64 %v, darwin/amd64 %v; want both", name, arm64, amd64)
		}
	}
}
