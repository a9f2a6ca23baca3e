package images

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/klauspost/compress/zstd"

	"github.com/airlock-dev/airlock/guest"
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

// fakeGuest writes out as a command's stdout, in 64 KiB pieces; args
// are the command's arguments it was asked to run.
type fakeGuest struct {
	out  []byte
	args *[]string
}

func (g fakeGuest) Run(_ context.Context, cmd client.Command) error {
	if g.args != nil {
		*g.args = cmd.Args
	}
	for rest := g.out; len(rest) > 0; {
		n := min(len(rest), 64<<10)
		if _, err := cmd.Stdout.Write(rest[:n]); err != nil {
			return err
		}
		rest = rest[n:]
	}
	return nil
}

// zstdBytes compresses b as the guest's layer command does: a stream
// with its window.
func zstdBytes(t *testing.T, b []byte) []byte {
	t.Helper()
	var out bytes.Buffer
	enc, err := zstd.NewWriter(&out, zstd.WithEncoderLevel(zstd.SpeedFastest), zstd.WithWindowSize(guest.LayerZstdWindow))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := enc.Write(b); err != nil {
		t.Fatal(err)
	}
	if err := enc.Close(); err != nil {
		t.Fatal(err)
	}
	return out.Bytes()
}

// The layer a builder sends back is kept under the digest of the tar,
// hashed on the way, whether it crossed the link as it is or
// compressed (a guest with guest.FeatureLayerZstd is asked for -zstd);
// one larger than the limit is refused and leaves nothing in the store.
func TestCaptureLayer(t *testing.T) {
	layer := bytes.Repeat([]byte("a file of the layer\n"), 20000)
	sum := sha256.Sum256(layer)
	for _, compressed := range []bool{false, true} {
		t.Run(fmt.Sprint("compressed=", compressed), func(t *testing.T) {
			sent := layer
			if compressed {
				sent = zstdBytes(t, layer)
			}
			st := oci.Store{Dir: t.TempDir()}
			var args []string
			d, n, over, err := captureLayer(context.Background(), fakeGuest{sent, &args}, st, int64(len(layer)), compressed)
			if err != nil {
				t.Fatal(err)
			}
			if over != int64(len(sent)) {
				t.Errorf("%d bytes crossed the link, captureLayer says %d", len(sent), over)
			}
			if slices.Contains(args, "-zstd") != compressed {
				t.Errorf("the guest was asked for %q", args)
			}
			if d.Hex != hex.EncodeToString(sum[:]) || n != int64(len(layer)) {
				t.Errorf("kept %s, %d bytes; want sha256:%x, %d", d, n, sum, len(layer))
			}
			if got, _ := os.ReadFile(st.Path(d)); !bytes.Equal(got, layer) {
				t.Errorf("the kept layer differs from what arrived")
			}

			st = oci.Store{Dir: t.TempDir()}
			_, _, _, err = captureLayer(context.Background(), fakeGuest{out: sent}, st, int64(len(layer))-1, compressed)
			if err == nil || !strings.Contains(err.Error(), "changed more than") {
				t.Fatalf("a layer over the limit: %v", err)
			}
			if entries, _ := os.ReadDir(filepath.Join(st.Dir, "blobs", "sha256")); len(entries) != 0 {
				t.Errorf("a refused layer left %v", entries)
			}
		})
	}
}

// A compressed layer is the guest's to make, so it is hostile input: a
// bomb, a stream cut short, garbage, garbage after a good frame and an
// endless run of frames that decode to nothing are all refused, leave
// nothing in the store, and do not hold more memory than the decoder's
// bounded window.
func TestCaptureLayerHostileZstd(t *testing.T) {
	const limit = 1 << 20
	good := zstdBytes(t, bytes.Repeat([]byte("x"), 1000))
	// A skippable frame: magic 0x184D2A50, a 4-byte length, that many bytes.
	skippable := append([]byte{0x50, 0x2a, 0x4d, 0x18, 8, 0, 0, 0}, make([]byte, 8)...)
	for name, c := range map[string]struct {
		sent []byte
		want string
	}{
		"bomb":                    {zstdBytes(t, make([]byte, 64<<20)), "changed more than"},
		"cut short":               {good[:len(good)-3], "the layer the guest sent"},
		"garbage":                 {bytes.Repeat([]byte("not zstd at all "), 100), "the layer the guest sent"},
		"garbage after a frame":   {append(slices.Clone(good), "trailing"...), "the layer the guest sent"},
		"endless empty frames":    {bytes.Repeat(skippable, 2*limit/len(skippable)), "changed more than"},
		"a window over the bound": {hugeWindowFrame(), "window size exceeded"},
	} {
		t.Run(name, func(t *testing.T) {
			st := oci.Store{Dir: t.TempDir()}
			_, _, _, err := captureLayer(context.Background(), fakeGuest{out: c.sent}, st, limit, true)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("got %v; want an error saying %q", err, c.want)
			}
			if entries, _ := os.ReadDir(filepath.Join(st.Dir, "blobs", "sha256")); len(entries) != 0 {
				t.Errorf("a refused layer left %v", entries)
			}
		})
	}
}

// oneFrame is b compressed as a single segment, its window as large as b.
func oneFrame(t *testing.T, b []byte) []byte {
	t.Helper()
	enc, err := zstd.NewWriter(nil)
	if err != nil {
		t.Fatal(err)
	}
	return enc.EncodeAll(b, nil)
}

// hugeWindowFrame is a frame whose header asks for a 1 GiB window
// (RFC 8878: Window_Descriptor exponent 20), then one raw byte.
func hugeWindowFrame() []byte {
	return []byte{0x28, 0xb5, 0x2f, 0xfd, 0x00, 20 << 3, 0x09, 0x00, 0x00, 'x'}
}
