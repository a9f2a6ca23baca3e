package images

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/airlock-dev/airlock/guest/client"
	"github.com/airlock-dev/airlock/vm/oci"
)

// A project's setup command reaches a terminal only as safe text: an
// escape sequence in devcontainer.json cannot clear the screen or hide
// what will run.
func TestSetupStepStringIsSafe(t *testing.T) {
	for _, s := range []SetupStep{{Shell: "echo hi\x1b[2J\x1b[1;1Hrm -rf ~"}, {Argv: []string{"sh", "-c", "x\rcurl evil\u202e"}}} {
		got := s.String()
		if strings.ContainsAny(got, "\x1b\r\n\u202e") {
			t.Errorf("%q rendered as %q", s, got)
		}
	}
}

// The apt step runs apt only when a package is missing: the step runs
// with fake dpkg-query, apt-get and rm that record their calls, dpkg's
// answer given per case.
func TestAptStepSkipsInstalledPackages(t *testing.T) {
	grep, err := exec.LookPath("grep")
	if err != nil {
		t.Skip("no grep here")
	}
	tests := []struct {
		name string
		pkgs []string
		// dpkg is what the fake dpkg-query prints; fail, whether it
		// exits 1 (a package it does not know).
		dpkg    string
		fail    bool
		wantApt bool
	}{
		{"all installed", []string{"git", "curl"}, "ii \nii \n", false, false},
		{"with an architecture", []string{"libc6:amd64", "g++"}, "ii \nii \n", false, false},
		{"one unknown", []string{"git", "golang-go"}, "ii \n", true, true},
		{"one removed, its configuration kept", []string{"git", "curl"}, "ii \nrc \n", false, true},
		{"one half installed", []string{"git"}, "iU \n", false, true},
		{"one of two architectures installed", []string{"libc6"}, "ii \nun \n", false, true},
		{"a version", []string{"git=1:2.39.5-0+deb12u3"}, "ii \n", false, true},
		{"a regular expression", []string{"python3.*"}, "ii \n", false, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			calls := filepath.Join(dir, "calls")
			fake := func(name, body string) {
				script := "#!/bin/sh\necho " + name + " \"$@\" >> " + calls + "\n" + body
				if err := os.WriteFile(filepath.Join(dir, name), []byte(script), 0o755); err != nil {
					t.Fatal(err)
				}
			}
			exit := "exit 0"
			if tt.fail {
				exit = "exit 1"
			}
			fake("dpkg-query", "printf '"+strings.ReplaceAll(tt.dpkg, "\n", `\n`)+"'\n"+exit)
			fake("apt-get", "")
			fake("rm", "")
			if err := os.Symlink(grep, filepath.Join(dir, "grep")); err != nil {
				t.Fatal(err)
			}
			cmd := exec.Command("/bin/sh", "-c", AptStep(tt.pkgs).Shell)
			cmd.Env = []string{"PATH=" + dir}
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Fatalf("the step failed: %v\n%s", err, out)
			}
			b, _ := os.ReadFile(calls)
			ran := strings.Contains(string(b), "apt-get")
			if ran != tt.wantApt {
				t.Errorf("apt ran: %v, want %v; calls:\n%s", ran, tt.wantApt, b)
			}
			if ran {
				for _, want := range []string{"apt-get -o Acquire::Languages=none update", "apt-get install -y -q --no-install-recommends " + strings.Join(tt.pkgs, " "), "apt-get clean"} {
					if !strings.Contains(string(b), want) {
						t.Errorf("calls lack %q:\n%s", want, b)
					}
				}
			}
		})
	}
}

// fakeGuest writes out as a command's stdout, in 64 KiB pieces.
type fakeGuest struct{ out []byte }

func (g fakeGuest) Run(_ context.Context, cmd client.Command) error {
	for rest := g.out; len(rest) > 0; {
		n := min(len(rest), 64<<10)
		if _, err := cmd.Stdout.Write(rest[:n]); err != nil {
			return err
		}
		rest = rest[n:]
	}
	return nil
}

// The layer a builder sends back is kept under the digest of what
// arrived, hashed on the way; one larger than the limit is refused and
// leaves nothing in the store.
func TestCaptureLayer(t *testing.T) {
	st := oci.Store{Dir: t.TempDir()}
	layer := bytes.Repeat([]byte("a file of the layer\n"), 20000)
	sum := sha256.Sum256(layer)
	d, n, err := captureLayer(context.Background(), fakeGuest{layer}, st, int64(len(layer)))
	if err != nil {
		t.Fatal(err)
	}
	if d.Hex != hex.EncodeToString(sum[:]) || n != int64(len(layer)) {
		t.Errorf("kept %s, %d bytes; want sha256:%x, %d", d, n, sum, len(layer))
	}
	if got, _ := os.ReadFile(st.Path(d)); !bytes.Equal(got, layer) {
		t.Errorf("the kept layer differs from what arrived")
	}

	st = oci.Store{Dir: t.TempDir()}
	_, _, err = captureLayer(context.Background(), fakeGuest{layer}, st, int64(len(layer))-1)
	if err == nil || !strings.Contains(err.Error(), "changed more than") {
		t.Fatalf("a layer over the limit: %v", err)
	}
	if entries, _ := os.ReadDir(filepath.Join(st.Dir, "blobs", "sha256")); len(entries) != 0 {
		t.Errorf("a refused layer left %v", entries)
	}
}
